//! The one constructor of a [`RunContext`]: what every case of a run shares. `run`, the crash
//! sweep and the case tests start from [`RunContext::new`] and set only what differs.

use std::path::PathBuf;
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::cluster::TargetHandles;
use crate::implementation::ImplementationSpec;
use crate::report::RunEvent;
use crate::vocab::Vocabulary;

use super::case::RunContext;

impl RunContext {
    /// A context on `target` for `implementation`, one instance per case going through an API
    /// proxy of its own, in the default revision, namespaces deleted after each case, no crash
    /// injected and no write recorded.
    pub fn new(
        target: &TargetHandles,
        implementation: ImplementationSpec,
        catalog: Arc<Catalog>,
        log_dir: PathBuf,
        events: tokio::sync::mpsc::UnboundedSender<RunEvent>,
    ) -> Self {
        RunContext {
            client: target.client.clone(),
            kubeconfig: target.kubeconfig.clone(),
            pods: target.pods.clone(),
            implementation,
            shared_instance: None,
            shared_proxy: None,
            api_proxy: true,
            vocab: Vocabulary::default(),
            catalog,
            keep_namespaces: false,
            restraint_fails_every_case: false,
            log_dir,
            events,
            inject_pin: None,
            inject_fault: None,
            record_writes: None,
        }
    }
}
