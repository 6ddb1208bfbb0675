//! Errors of the controllers and of [`super::run`].

use crate::build::BuildError;

/// What can go wrong while running the controllers or reconciling one object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable client configuration (kubeconfig, in-cluster or default).
    #[error("failed to load the client configuration")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The client could not be built from the configuration.
    #[error("failed to build the client")]
    Client(#[source] Box<kube::Error>),
    /// An API request failed.
    #[error("failed to {verb} {kind} {name}")]
    Api {
        /// What was attempted (`create`, `delete`, `apply status of`, ...).
        verb: &'static str,
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// The object changed since it was read (a resourceVersion precondition failed): look
    /// again rather than act on a stale view.
    #[error("failed to {verb} {kind} {name}: it changed since it was read")]
    Conflict {
        /// What was attempted.
        verb: &'static str,
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
    },
    /// A create was not sent: this process knows the scope it would land in closed (C4).
    #[error("did not create {kind} {name}: its scope is closed")]
    ScopeClosed {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
    },
    /// A child could not be built from the template.
    #[error("failed to build the children of {name}")]
    Build {
        /// The parent.
        name: String,
        /// The cause.
        #[source]
        source: BuildError,
    },
}

impl Error {
    /// Whether a quick retry is the right answer (a stale read, not a broken request).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    /// Whether a request got no answer from the apiserver (the connection failed or was
    /// dropped): it may have been carried out or not.
    pub fn unanswered(&self) -> bool {
        matches!(self, Error::Api { source, .. } if !matches!(source.as_ref(), kube::Error::Api(_)))
    }

    /// Whether the object went away while it was being reconciled (nothing left to do).
    pub fn is_gone(&self) -> bool {
        matches!(self, Error::Api { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 404))
    }
}

/// `Err(kube::Error)` of one request to [`Error`]: 409 becomes [`Error::Conflict`].
pub(super) fn api_error(
    verb: &'static str,
    kind: String,
    name: &str,
) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_string();
    move |source| match &source {
        kube::Error::Api(status) if status.code == 409 => Error::Conflict { verb, kind, name },
        _ => Error::Api {
            verb,
            kind,
            name,
            source: Box::new(source),
        },
    }
}
