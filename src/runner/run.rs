//! Running a selection of cases: in parallel (`jobs` at a time), cases that need the cluster
//! to themselves alone, every event streamed to the writers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use tokio::sync::{Mutex as AsyncMutex, RwLock, Semaphore};

use super::case::{RunContext, needs_exclusive, run_case};
use super::implementation::{ImplementationSpec, Instance};
use crate::catalog::{Case, Catalog, Profile};
use crate::kubelet::Fleet;
use crate::report::{Recorder, RunEvent, RunResults};
use crate::vocab::Vocabulary;

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Each pattern selects cases whose name contains it, whose area equals it, or that
    /// cite it as a clause id; empty selects every case.
    pub filters: Vec<String>,
    /// Only this profile, when set.
    pub profile: Option<Profile>,
}

impl Selection {
    /// Whether `case` is selected.
    pub fn selects(&self, case: &Case) -> bool {
        self.profile.is_none_or(|p| p == case.profile)
            && (self.filters.is_empty()
                || self.filters.iter().any(|f| {
                    case.name.contains(f.as_str())
                        || &case.area == f
                        || case.clauses.iter().any(|c| c == f)
                }))
    }
}

/// Where and how a run happens.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The implementation under test.
    pub implementation: ImplementationSpec,
    /// The vocabulary of the revision under test.
    pub vocab: Vocabulary,
    /// Cases at once.
    pub jobs: usize,
    /// Keep case namespaces afterwards.
    pub keep_namespaces: bool,
    /// Where implementation logs go.
    pub log_dir: PathBuf,
}

/// The target's handles.
#[derive(Clone)]
pub struct TargetHandles {
    /// Admin client.
    pub client: Client,
    /// Its kubeconfig (for the implementation).
    pub kubeconfig: PathBuf,
    /// The simulated fleet, on the embedded target.
    pub fleet: Option<Arc<Fleet>>,
}

impl std::fmt::Debug for TargetHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetHandles")
            .field("kubeconfig", &self.kubeconfig)
            .field("fleet", &self.fleet.is_some())
            .finish_non_exhaustive()
    }
}

/// The default number of cases at once: enough to overlap waiting, few enough for 2 cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| (n.get() * 2).clamp(2, 8))
        .unwrap_or(4)
}

/// Runs `cases` and returns the results; every event also goes to `sink`.
pub async fn run_cases(
    target: &TargetHandles,
    catalog: Arc<Catalog>,
    cases: Vec<Case>,
    settings: &RunSettings,
    mut sink: impl FnMut(&RunEvent) + Send + 'static,
) -> Result<RunResults, std::io::Error> {
    std::fs::create_dir_all(&settings.log_dir)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let consumer = tokio::spawn(async move {
        let mut recorder = Recorder::new();
        while let Some(event) = rx.recv().await {
            sink(&event);
            recorder.on_event(&event);
        }
        recorder.results().clone()
    });
    let started = Instant::now();
    let _ = tx.send(RunEvent::RunStarted { cases: cases.len() });
    let shared_instance = if settings.implementation.per_case() {
        None
    } else {
        match settings.implementation.command(&target.kubeconfig, None) {
            Some(_) => Some(Arc::new(AsyncMutex::new(
                Instance::start(
                    &settings.implementation,
                    &target.kubeconfig,
                    None,
                    &settings.log_dir.join("implementation.log"),
                )
                .map_err(std::io::Error::other)?,
            ))),
            None => None,
        }
    };
    let context = Arc::new(RunContext {
        client: target.client.clone(),
        kubeconfig: target.kubeconfig.clone(),
        fleet: target.fleet.clone(),
        implementation: settings.implementation.clone(),
        shared_instance,
        vocab: settings.vocab,
        catalog,
        keep_namespaces: settings.keep_namespaces,
        log_dir: settings.log_dir.clone(),
        events: tx.clone(),
    });
    let slots = Arc::new(Semaphore::new(settings.jobs.max(1)));
    let cluster = Arc::new(RwLock::new(()));
    // Exclusive cases last, so they do not hold up the parallel ones.
    let (mut ordered, exclusive): (Vec<Case>, Vec<Case>) = cases
        .into_iter()
        .partition(|c| !needs_exclusive(c, &context.catalog, &settings.implementation));
    ordered.extend(exclusive);
    let mut tasks = Vec::new();
    for case in ordered {
        let context = context.clone();
        let slots = slots.clone();
        let cluster = cluster.clone();
        let exclusive = needs_exclusive(&case, &context.catalog, &settings.implementation);
        tasks.push(tokio::spawn(async move {
            // Always the slot first, then the cluster lock: a case holding the write lock
            // never waits for a slot held by a case queued behind it.
            let _slot = slots
                .acquire()
                .await
                .expect("the semaphore is never closed");
            if exclusive {
                let _alone = cluster.write().await;
                run_case(&context, &case).await;
            } else {
                let _shared = cluster.read().await;
                run_case(&context, &case).await;
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    if let Some(instance) = &context.shared_instance {
        instance.lock().await.stop();
    }
    let _ = tx.send(RunEvent::RunFinished {
        duration: started.elapsed(),
    });
    drop(tx);
    drop(context);
    Ok(consumer.await.expect("the event consumer does not panic"))
}
