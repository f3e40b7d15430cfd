//! A rollout simulated on a model cluster: the Deployment's pure rolling decisions and a ReplicaSet model
//! (pods appear at once and turn available after 1–3 ticks; scale-downs remove unavailable pods first) are
//! applied in turn until the rollout settles. Proves convergence and the two promises of RollingUpdate on
//! every tick: never more than `replicas + maxSurge` pods wanted, never fewer than
//! `replicas − maxUnavailable` available.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::json;

use super::rolling::{reconcile_new, reconcile_old};
use super::tests::{deployment, rs};
use super::util::{self, max_surge, max_unavailable, new_rs_new_replicas, replicas};

struct ModelRs {
    name: String,
    spec: i32,
    /// The tick at which each pod is available.
    pods: Vec<u64>,
}

struct Model {
    rss: Vec<ModelRs>,
    tick: u64,
    seed: u64,
}

impl Model {
    fn rand_delay(&mut self) -> u64 {
        // xorshift: deterministic, 1..=3 ticks
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        1 + self.seed % 3
    }

    fn available(&self, r: &ModelRs) -> i32 {
        r.pods.iter().filter(|t| **t <= self.tick).count() as i32
    }

    fn object(&self, r: &ModelRs) -> Arc<ReplicaSet> {
        Arc::new(rs(
            &r.name,
            r.spec,
            json!({"status": {"replicas": r.pods.len(), "availableReplicas": self.available(r)}}),
        ))
    }

    fn total_available(&self) -> i32 {
        self.rss.iter().map(|r| self.available(r)).sum()
    }

    /// One pass of `rolloutRolling` (the new ReplicaSet is the last one).
    fn deployment_pass(&mut self, d: &Deployment) {
        let objs: Vec<Arc<ReplicaSet>> = self.rss.iter().map(|r| self.object(r)).collect();
        let new = objs.last().expect("the new one exists").clone();
        if let Some(n) = reconcile_new(d, &objs, &new).unwrap() {
            self.rss.last_mut().unwrap().spec = n;
            return;
        }
        let olds = &objs[..objs.len() - 1];
        for (name, to) in reconcile_old(d, &objs, &util::active(olds), &new) {
            self.rss.iter_mut().find(|r| r.name == name).unwrap().spec = to;
        }
    }

    /// The ReplicaSet controller: create missing pods, delete extra ones (unavailable first).
    fn replicaset_pass(&mut self) {
        for i in 0..self.rss.len() {
            let want = self.rss[i].spec as usize;
            while self.rss[i].pods.len() < want {
                let at = self.tick + self.rand_delay();
                self.rss[i].pods.push(at);
            }
            if self.rss[i].pods.len() > want {
                // Sort latest-available first, so unavailable ones go first.
                self.rss[i].pods.sort_by(|a, b| b.cmp(a));
                let extra = self.rss[i].pods.len() - want;
                self.rss[i].pods.drain(..extra);
            }
        }
    }
}

#[test]
fn a_rollout_of_100_replicas_with_25_percent_surge_converges_within_its_bounds() {
    for (surge, unavailable) in [("25%", "25%"), ("25%", "0%"), ("1", "0"), ("0", "10%")] {
        let d = deployment(json!({"spec": {"replicas": 100, "strategy": {"rollingUpdate": {
            "maxSurge": surge, "maxUnavailable": unavailable}}}}));
        let (r, s, u) = (replicas(&d), max_surge(&d), max_unavailable(&d));
        let mut m = Model {
            rss: vec![ModelRs {
                name: "old".into(),
                spec: 100,
                pods: vec![0; 100],
            }],
            tick: 1,
            seed: 0x9e37_79b9_7f4a_7c15,
        };
        // The new ReplicaSet, created as getNewReplicaSet does.
        let objs: Vec<Arc<ReplicaSet>> = m.rss.iter().map(|x| m.object(x)).collect();
        let fresh = rs("new", 0, json!({}));
        let mut all = objs.clone();
        all.push(Arc::new(fresh.clone()));
        let first = new_rs_new_replicas(&d, &all, &fresh).unwrap();
        m.rss.push(ModelRs {
            name: "new".into(),
            spec: first,
            pods: vec![],
        });
        let mut ticks = 0;
        loop {
            let wanted: i32 = m.rss.iter().map(|x| x.spec).sum();
            assert!(
                wanted <= r + s,
                "{surge}/{unavailable}: {wanted} wanted at tick {ticks}"
            );
            assert!(
                m.total_available() >= r - u,
                "{surge}/{unavailable}: only {} available at tick {ticks}",
                m.total_available()
            );
            let new = &m.rss[1];
            if new.spec == r && m.available(new) == r && m.rss[0].spec == 0 && m.rss[0].pods.is_empty() {
                break;
            }
            m.deployment_pass(&d);
            m.replicaset_pass();
            let wanted: i32 = m.rss.iter().map(|x| x.spec).sum();
            assert!(wanted <= r + s);
            assert!(m.total_available() >= r - u, "after the pass at tick {ticks}");
            m.tick += 1;
            ticks += 1;
            assert!(ticks < 1000, "{surge}/{unavailable}: no convergence");
        }
        // 25%/25% moves ~50 pods a round of 1–3 ticks, so it is quick; surge 1 moves one at a time.
        if surge == "25%" && unavailable == "25%" {
            assert!(ticks < 40, "took {ticks} ticks");
        }
    }
}
