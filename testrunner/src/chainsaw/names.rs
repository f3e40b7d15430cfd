//! The per-test namespace name: `chainsaw-<adjective>-<animal>`, as chainsaw's
//! `petname.Generate(2, "-")` (`github.com/dustinkirkland/golang-petname`) gives it.

const ADJECTIVES: &[&str] = &[
    "able", "active", "adapted", "amazed", "amused", "apt", "awake", "aware", "balanced", "big", "boss",
    "brave", "bright", "busy", "calm", "careful", "charmed", "cheerful", "choice", "clean", "clever",
    "close", "cool", "correct", "crack", "creative", "curious", "darling", "daring", "decent", "deep",
    "direct", "driven", "eager", "easy", "enabled", "epic", "equal", "exact", "fair", "famous", "fast",
    "fine", "firm", "fit", "fluent", "flying", "free", "fresh", "full", "funky", "game", "generous",
    "gentle", "giving", "glad", "golden", "good", "grand", "great", "growing", "handy", "happy", "hardy",
    "healthy", "helpful", "holy", "honest", "hopeful", "humble", "ideal", "immense", "improved", "informed",
    "innocent", "intent", "just", "keen", "key", "kind", "large", "legal", "light", "literate", "live",
    "loved", "loyal", "lucky", "magical", "main", "major", "many", "master", "merry", "mighty", "mint",
    "modern", "moral", "moved", "native", "natural", "neat", "new", "nice", "noble", "normal", "notable",
    "novel", "open", "optimal", "organic", "patient", "perfect", "pet", "picked", "pleasant", "poetic",
    "polite", "popular", "precious", "present", "pretty", "prime", "probable", "proper", "proud", "quick",
    "quiet", "rapid", "rare", "ready", "real", "refined", "relaxed", "renewed", "rested", "rich", "right",
    "robust", "romantic", "safe", "saved", "secure", "select", "sharp", "shining", "simple", "skilled",
    "smart", "smooth", "social", "solid", "sound", "special", "splendid", "square", "stable", "star",
    "steady", "still", "strong", "super", "sure", "sweet", "swift", "tender", "thankful", "tidy", "tight",
    "together", "top", "touched", "tough", "true", "trusted", "up", "upright", "valid", "vast", "viable",
    "vital", "warm", "welcome", "well", "whole", "wise", "witty", "worthy",
];

const ANIMALS: &[&str] = &[
    "aardvark", "alpaca", "anchovy", "ant", "antelope", "ape", "baboon", "badger", "bass", "bat", "bear",
    "beaver", "bee", "beetle", "bengal", "bird", "bison", "bluebird", "boa", "bobcat", "bream", "buck",
    "buffalo", "bug", "bulldog", "burro", "buzzard", "calf", "camel", "cardinal", "caribou", "cat",
    "catfish", "cattle", "chamois", "cheetah", "chicken", "chigger", "chimp", "chipmunk", "cicada", "clam",
    "cobra", "cod", "collie", "colt", "condor", "coral", "cougar", "cow", "coyote", "crab", "crane",
    "crappie", "cricket", "crow", "cub", "deer", "dingo", "dodo", "doe", "dog", "dolphin", "donkey", "dory",
    "dove", "dragon", "drake", "duck", "eagle", "eel", "egret", "elephant", "elf", "elk", "emu", "ewe",
    "falcon", "ferret", "filly", "finch", "fish", "flamingo", "flea", "fly", "foal", "fowl", "fox", "frog",
    "gannet", "gar", "gator", "gazelle", "gecko", "gibbon", "giraffe", "gnat", "gnu", "goat", "goose",
    "gopher", "gorilla", "grizzly", "grouse", "grub", "guinea", "gull", "guppy", "haddock", "halibut",
    "hamster", "hare", "hawk", "hedgehog", "hen", "heron", "herring", "hippo", "hog", "hound", "husky",
    "ibex", "iguana", "impala", "insect", "jackal", "jaguar", "jay", "jennet", "joey", "kangaroo", "katydid",
    "kid", "killdeer", "kingfish", "kit", "kite", "kitten", "kiwi", "koala", "lab", "lamb", "lark", "leech",
    "lemming", "lemur", "leopard", "liger", "lion", "lionfish", "lizard", "llama", "lobster", "locust",
    "longhorn", "loon", "louse", "lynx", "macaque", "macaw", "mackerel", "magpie", "mako", "malamute",
    "mallard", "mammal", "mammoth", "manatee", "mantis", "marlin", "marmoset", "marmot", "marten", "martin",
    "mastiff", "mayfly", "meerkat", "mink", "minnow", "mite", "mole", "mollusk", "molly", "monarch",
    "mongoose", "monitor", "monkey", "moose", "moth", "mouse", "mudfish", "mule", "mullet", "mustang",
    "narwhal", "newt", "octopus", "opossum", "orca", "oriole", "osprey", "ostrich", "owl", "ox", "oyster",
    "panda", "panther", "parakeet", "parrot", "peacock", "pegasus", "pelican", "penguin", "perch",
    "pheasant", "pig", "pigeon", "piglet", "pika", "pipefish", "piranha", "platypus", "polecat", "pony",
    "poodle", "porpoise", "possum", "prawn", "primate", "pug", "puma", "python", "quagga", "quail", "rabbit",
    "raccoon", "ram", "rat", "raven", "redbird", "reindeer", "reptile", "rhino", "robin", "rooster",
    "salmon", "satyr", "sawfish", "scorpion", "seagull", "seahorse", "seal", "shark", "sheep", "shepherd",
    "shiner", "shrew", "shrimp", "silkworm", "skink", "skunk", "sloth", "slug", "snail", "snake", "snapper",
    "snipe", "sole", "sparrow", "spider", "squid", "squirrel", "stag", "starfish", "stinkbug", "stork",
    "sturgeon", "swan", "swift", "tadpole", "tahr", "tapir", "tarpon", "termite", "terrier", "tetra",
    "thrush", "tick", "tiger", "titmouse", "toad", "tomcat", "tortoise", "toucan", "treefrog", "trout",
    "tuna", "turkey", "turtle", "unicorn", "urchin", "viper", "vulture", "wahoo", "walleye", "walrus",
    "warthog", "wasp", "weasel", "weevil", "whale", "whippet", "wildcat", "wolf", "wombat", "woodcock",
    "worm", "wren", "yak", "yeti", "zebra",
];

/// A fresh namespace name from a random source (`rand` picks the words).
pub fn namespace_name(random: u64) -> String {
    let adjective = ADJECTIVES[(random % ADJECTIVES.len() as u64) as usize];
    let animal = ANIMALS[((random / ADJECTIVES.len() as u64) % ANIMALS.len() as u64) as usize];
    format!("chainsaw-{adjective}-{animal}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_chainsaw_adjective_animal_and_valid_dns_labels() {
        for r in [0u64, 1, 7, 123_456_789, u64::MAX] {
            let n = namespace_name(r);
            let parts: Vec<&str> = n.split('-').collect();
            assert_eq!(parts.len(), 3, "{n}");
            assert_eq!(parts[0], "chainsaw");
            assert!(
                ADJECTIVES.contains(&parts[1]) && ANIMALS.contains(&parts[2]),
                "{n}"
            );
            assert!(
                n.len() <= 63 && n.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{n}"
            );
        }
        assert_ne!(namespace_name(1), namespace_name(2));
    }
}
