//! Endpoint choice per connection, as kube-proxy's userspace `LoadBalancerRR` did: round robin over the
//! ready endpoints, and with `sessionAffinity: ClientIP` the client's last endpoint while it was used less
//! than the timeout ago. Pure: time is passed in.
//!
//! Deliberate difference: the endpoint list is kept sorted instead of shuffled on each change, so the order is
//! reproducible; the round robin index survives a change of the list.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::table::{ServicePort, ServicePortName};

#[derive(Debug, Default)]
struct State {
    endpoints: Vec<SocketAddr>,
    next: usize,
    affinity: Option<Duration>,
    clients: HashMap<IpAddr, (SocketAddr, Instant)>,
}

/// Round robin with client IP affinity, per Service port.
#[derive(Debug, Default)]
pub struct Balancer {
    services: HashMap<ServicePortName, State>,
}

impl Balancer {
    /// Takes the new table: endpoints and affinity per Service port; ports no longer present are forgotten,
    /// affinity entries to endpoints that left are dropped.
    pub fn update(&mut self, table: &[ServicePort]) {
        let mut services = HashMap::with_capacity(table.len());
        for port in table {
            let mut state = self.services.remove(&port.id).unwrap_or_default();
            if state.affinity != port.affinity {
                state.clients.clear();
            }
            state.affinity = port.affinity;
            state.clients.retain(|_, (ep, _)| port.endpoints.contains(ep));
            state.endpoints = port.endpoints.clone();
            services.insert(port.id.clone(), state);
        }
        self.services = services;
    }

    /// The endpoint for a new connection (or UDP session) from `client`; `skip_affinity` is set for a retry
    /// after a failed dial (upstream `sessionAffinityReset`). None when the port has no ready endpoint.
    pub fn next(
        &mut self,
        id: &ServicePortName,
        client: IpAddr,
        now: Instant,
        skip_affinity: bool,
    ) -> Option<SocketAddr> {
        let state = self.services.get_mut(id)?;
        if state.endpoints.is_empty() {
            return None;
        }
        if let Some(timeout) = state.affinity
            && !skip_affinity
            && let Some((ep, used)) = state.clients.get_mut(&client)
            && now.saturating_duration_since(*used) < timeout
        {
            *used = now;
            return Some(*ep);
        }
        let ep = state.endpoints[state.next % state.endpoints.len()];
        state.next = (state.next + 1) % state.endpoints.len();
        if state.affinity.is_some() {
            state.clients.insert(client, (ep, now));
        }
        Some(ep)
    }

    /// Drops affinity entries idle longer than their timeout (upstream's periodic cleanup).
    pub fn expire(&mut self, now: Instant) {
        for state in self.services.values_mut() {
            if let Some(timeout) = state.affinity {
                state
                    .clients
                    .retain(|_, (_, used)| now.saturating_duration_since(*used) < timeout);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::Protocol;
    use super::*;
    use std::net::Ipv4Addr;

    fn id() -> ServicePortName {
        ServicePortName {
            namespace: "ns".into(),
            name: "web".into(),
            port: "http".into(),
            protocol: Protocol::Tcp,
        }
    }

    fn port(endpoints: &[&str], affinity: Option<u64>) -> ServicePort {
        ServicePort {
            id: id(),
            cluster_ip: Ipv4Addr::new(10, 96, 0, 20),
            port: 80,
            node_port: None,
            load_balancer: false,
            affinity: affinity.map(Duration::from_secs),
            endpoints: endpoints.iter().map(|e| e.parse().unwrap()).collect(),
        }
    }

    fn client(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 112, 6, last))
    }

    fn picks(b: &mut Balancer, steps: &[(u8, u64, bool)], start: Instant) -> Vec<Option<String>> {
        steps
            .iter()
            .map(|(c, at, skip)| {
                b.next(&id(), client(*c), start + Duration::from_secs(*at), *skip)
                    .map(|e| e.to_string())
            })
            .collect()
    }

    #[test]
    fn choices_follow_round_robin_and_affinity() {
        let e = |s: &str| Some(s.to_owned());
        type Case = (
            &'static str,
            Option<u64>,
            Vec<(u8, u64, bool)>,
            Vec<Option<String>>,
        );
        let cases: Vec<Case> = vec![
            (
                "round robin over every endpoint, any client",
                None,
                vec![(1, 0, false), (2, 0, false), (1, 0, false), (1, 0, false)],
                vec![
                    e("10.0.0.1:80"),
                    e("10.0.0.2:80"),
                    e("10.0.0.3:80"),
                    e("10.0.0.1:80"),
                ],
            ),
            (
                "affinity sticks per client",
                Some(10),
                vec![
                    (1, 0, false),
                    (2, 0, false),
                    (1, 1, false),
                    (2, 2, false),
                    (3, 3, false),
                ],
                vec![
                    e("10.0.0.1:80"),
                    e("10.0.0.2:80"),
                    e("10.0.0.1:80"),
                    e("10.0.0.2:80"),
                    e("10.0.0.3:80"),
                ],
            ),
            (
                "affinity ends after the timeout since the last use",
                Some(10),
                vec![(1, 0, false), (1, 9, false), (1, 18, false), (1, 29, false)],
                vec![
                    e("10.0.0.1:80"),
                    e("10.0.0.1:80"),
                    e("10.0.0.1:80"),
                    e("10.0.0.2:80"),
                ],
            ),
            (
                "a retry skips affinity and re-pins",
                Some(10),
                vec![(1, 0, false), (1, 1, true), (1, 2, false)],
                vec![e("10.0.0.1:80"), e("10.0.0.2:80"), e("10.0.0.2:80")],
            ),
        ];
        let start = Instant::now();
        for (name, affinity, steps, want) in cases {
            let mut b = Balancer::default();
            b.update(&[port(&["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"], affinity)]);
            assert_eq!(picks(&mut b, &steps, start), want, "{name}");
        }
    }

    #[test]
    fn no_endpoints_or_unknown_port_gives_none() {
        let mut b = Balancer::default();
        b.update(&[port(&[], None)]);
        assert_eq!(b.next(&id(), client(1), Instant::now(), false), None);
        b.update(&[]);
        assert_eq!(b.next(&id(), client(1), Instant::now(), false), None);
    }

    #[test]
    fn a_removed_endpoint_loses_its_clients_and_new_ones_join_the_rotation() {
        let start = Instant::now();
        let mut b = Balancer::default();
        b.update(&[port(&["10.0.0.1:80", "10.0.0.2:80"], Some(100))]);
        assert_eq!(
            b.next(&id(), client(1), start, false),
            Some("10.0.0.1:80".parse().unwrap())
        );
        b.update(&[port(&["10.0.0.2:80", "10.0.0.3:80"], Some(100))]);
        let again = b.next(&id(), client(1), start, false).unwrap();
        assert_ne!(again, "10.0.0.1:80".parse().unwrap());
        let mut seen: Vec<_> = (2..6)
            .filter_map(|c| b.next(&id(), client(c), start, false))
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 2, "both endpoints take new clients: {seen:?}");
    }

    #[test]
    fn expire_drops_idle_clients() {
        let start = Instant::now();
        let mut b = Balancer::default();
        b.update(&[port(&["10.0.0.1:80", "10.0.0.2:80"], Some(10))]);
        b.next(&id(), client(1), start, false);
        b.expire(start + Duration::from_secs(11));
        assert!(b.services[&id()].clients.is_empty());
    }
}
