//! Images of this very executable, built offline with `docker import` (no registry, no base
//! image): the binary with the shared libraries it loads, `/tmp`, and a link naming it
//! `grove-reference-operator`, so one build gives both the harness's conformance image and the
//! reference operator's image.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What an image is for: which command it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The harness run in a pod by a conformance runner (Hydrophone's contract): entrypoint
    /// `grove-conformance in-cluster`, with busybox's `sh` and `cat` (the runner reads the
    /// progress log with them), as user 65534.
    Conformance,
    /// The reference operator as `reference-operator/deploy/` runs it: entrypoint
    /// `/usr/local/bin/grove-reference-operator`, command `run`, as user 65532.
    ReferenceOperator,
}

impl Role {
    fn changes(self) -> Vec<&'static str> {
        match self {
            Role::Conformance => vec![
                r#"ENTRYPOINT ["/grove-conformance", "in-cluster"]"#,
                "USER 65534:65534",
                "ENV PATH=/usr/local/bin:/bin",
                "WORKDIR /tmp",
            ],
            Role::ReferenceOperator => vec![
                r#"ENTRYPOINT ["/usr/local/bin/grove-reference-operator"]"#,
                r#"CMD ["run"]"#,
                "USER 65532:65532",
            ],
        }
    }
}

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file could not be staged.
    #[error("failed to stage {}: {source}", path.display())]
    Stage {
        /// Which.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A tool failed.
    #[error("`{command}` failed: {detail}")]
    Tool {
        /// The command.
        command: String,
        /// What it said.
        detail: String,
    },
}

/// Copies a file or a folder with everything in it.
fn copy_tree(from: &Path, to: &Path) -> Result<(), ImageError> {
    if from.is_dir() {
        std::fs::create_dir_all(to).map_err(stage_error(to))?;
        for entry in std::fs::read_dir(from).map_err(stage_error(from))? {
            let entry = entry.map_err(stage_error(from))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(stage_error(parent))?;
        }
        std::fs::copy(from, to)
            .map_err(stage_error(from))
            .map(|_| ())
    }
}

fn stage_error(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Stage {
        path: path.to_path_buf(),
        source,
    }
}

/// Builds `tag` from `binary` for `role`; a conformance image also carries `catalog`'s
/// `cases/`, `fixtures/` and `durations.yaml` as `/catalog`.
pub fn build(binary: &Path, tag: &str, role: Role, catalog: &Path) -> Result<(), ImageError> {
    let root = tempfile::tempdir().map_err(stage_error(Path::new("a temporary directory")))?;
    let rootfs = root.path();
    let target = rootfs.join("grove-conformance");
    // Debug information is of no use in the image and makes it ten times larger.
    let stripped = Command::new("strip")
        .args(["--strip-debug", "-o"])
        .arg(&target)
        .arg(binary)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        std::fs::copy(binary, &target).map_err(stage_error(binary))?;
    }
    let ldd = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| ImageError::Tool {
            command: "ldd".into(),
            detail: e.to_string(),
        })?;
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        let dest = rootfs.join(lib.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(stage_error(parent))?;
        }
        std::fs::copy(lib, &dest).map_err(stage_error(Path::new(lib)))?;
    }
    let bin = rootfs.join("usr/local/bin");
    std::fs::create_dir_all(&bin).map_err(stage_error(&bin))?;
    std::os::unix::fs::symlink("/grove-conformance", bin.join("grove-reference-operator"))
        .map_err(stage_error(&bin))?;
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(stage_error(&tmp))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
        .map_err(stage_error(&tmp))?;
    let etc = rootfs.join("etc");
    std::fs::create_dir_all(&etc).map_err(stage_error(&etc))?;
    std::fs::write(
        etc.join("passwd"),
        "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
    )
    .map_err(stage_error(&etc))?;
    std::fs::write(
        etc.join("group"),
        "root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n",
    )
    .map_err(stage_error(&etc))?;
    std::fs::write(etc.join("nsswitch.conf"), "hosts: files dns\n").map_err(stage_error(&etc))?;
    if role == Role::Conformance {
        let busybox = Path::new("/bin/busybox");
        if !busybox.exists() {
            return Err(ImageError::Tool {
                command: "/bin/busybox".into(),
                detail: "not installed: `apt-get install busybox-static` (the conformance image carries its sh and cat)".into(),
            });
        }
        let bin = rootfs.join("bin");
        std::fs::create_dir_all(&bin).map_err(stage_error(&bin))?;
        std::fs::copy(busybox, bin.join("busybox")).map_err(stage_error(busybox))?;
        for applet in ["sh", "cat", "ls", "sleep", "tar"] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).map_err(stage_error(&bin))?;
        }
        let into = rootfs.join("catalog");
        for part in ["cases", "fixtures", "durations.yaml"] {
            let from = catalog.join(part);
            if from.exists() {
                copy_tree(&from, &into.join(part))?;
            } else if part != "durations.yaml" {
                return Err(ImageError::Stage {
                    path: from,
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "the catalog has no such folder",
                    ),
                });
            }
        }
    }
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["--numeric-owner", "-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| ImageError::Tool {
            command: "tar".into(),
            detail: e.to_string(),
        })?;
    let mut import = super::docker::command();
    import.arg("import");
    for change in role.changes() {
        import.args(["--change", change]);
    }
    let stdin = tar.stdout.take().map_or(Stdio::null(), Stdio::from);
    let out = import
        .args(["-", tag])
        .stdin(stdin)
        .output()
        .map_err(|e| ImageError::Tool {
            command: "docker import".into(),
            detail: e.to_string(),
        })?;
    let tarred = tar.wait().is_ok_and(|s| s.success());
    if !out.status.success() || !tarred {
        return Err(ImageError::Tool {
            command: format!("docker import {tag}"),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}
