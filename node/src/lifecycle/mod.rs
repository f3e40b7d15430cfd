//! Pure decisions of the node agent's pod lifecycle: what a pod worker does next ([`plan`]), the container
//! hash that tells a running container from a changed spec ([`hash`]), CrashLoopBackOff and image pull
//! backoff ([`backoff`]) and the pod status the kubelet reports ([`status`]). Nothing here touches Docker,
//! the clock or the network: the pod worker gathers an [`plan::ObservedPod`] from the runtime, passes the
//! time in, and executes the [`plan::PodActions`] it gets back. These are ports of upstream's
//! `computePodActions`, `HashContainer`, `flowcontrol.Backoff`, `getPhase` and `generateAPIPodStatus`
//! (see `/work/shared/reference/kubelet-behaviour.md` §4 and §5), table-tested without a runtime.

pub mod backoff;
pub mod deadline;
pub mod hash;
pub mod plan;
pub mod status;
