//! The fake's `RuntimeService` and `ImageService`: containerd's CRI behaviour over the state in
//! the parent module.

use super::*;
use crate::cri_api::{
    AttachRequest, ContainerAttributes, ContainerStats, CpuUsage, ExecRequest, FilesystemUsage, ImageSpec, MemoryUsage,
    UInt64Value,
};

#[async_trait]
impl RuntimeService for FakeRuntime {
    async fn runtime_handlers(&self) -> RuntimeResult<Vec<crate::cri_api::RuntimeHandler>> {
        self.delay().await;
        Ok(self.lock().handler_features.clone())
    }

    async fn version(&self) -> RuntimeResult<String> {
        self.delay().await;
        self.reads.version.fetch_add(1, Ordering::Relaxed);
        Ok(format!("podwright-fake {}", env!("CARGO_PKG_VERSION")))
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String> {
        self.delay().await;
        let lost = self
            .fault(|_| {
                let m = config.metadata.as_ref();
                Call::RunPodSandbox {
                    name: m.map(|m| m.name.clone()).unwrap_or_default(),
                    attempt: m.map_or(0, |m| m.attempt),
                }
            })
            .await?;
        // Copied before taking the lock that every pod's calls wait on.
        let metadata = config.metadata.clone().unwrap_or_default();
        let pod: Arc<str> = metadata.name.as_str().into();
        let (labels, annotations) = (config.labels.clone(), config.annotations.clone());
        let log_directory = config.log_directory.clone();
        let mut state = self.lock();
        if state.log_calls {
            let call = Call::RunPodSandbox { name: metadata.name.clone(), attempt: metadata.attempt };
            self.log(&mut state, Some(pod.clone()), call);
        }
        if !state.handlers.contains(runtime_handler) {
            return Err(RuntimeError::Failed(format!("no runtime for \"{runtime_handler}\" is configured")));
        }
        state.seq += 1;
        let seq = state.seq;
        let id: Arc<str> = images::fake_id(SANDBOX_SALT, seq).into();
        // 10.0.0.1, 10.0.0.2, ... carrying into the third and second octets past 255.
        state.ips += 1;
        let n = state.ips;
        let ip = format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
        let status = PodSandboxStatus {
            id: id.to_string(),
            metadata: Some(metadata),
            state: PodSandboxState::SandboxReady as i32,
            created_at: nanos(self.clock.now()),
            network: Some(PodSandboxNetworkStatus { ip: ip.clone(), additional_ips: Vec::new() }),
            linux: None,
            labels,
            annotations,
            runtime_handler: runtime_handler.to_string(),
        };
        state.sandbox_labels.insert(&id, &status.labels);
        let (uid, attempt) = status.metadata.as_ref().map(|m| (m.uid.clone(), m.attempt)).unwrap_or_default();
        let ready = Change::SandboxReady { id: id.to_string(), uid, attempt, ip: ip.clone() };
        let sandbox = Sandbox { status, seq, pod, log_directory, containers: Vec::new() };
        state.sandboxes.insert(id.clone(), sandbox);
        self.record(&mut state, || ready);
        self.emit(&id, RuntimeEventKind::Started);
        lost.map_or(Ok(id.to_string()), Err)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.delay().await;
        let lost = self.fault(|s| Call::StopPodSandbox { name: s.sandbox_name(sandbox_id) }).await?;
        let mut state = self.lock();
        self.sandbox_call(&mut state, sandbox_id, |name| Call::StopPodSandbox { name });
        if !state.sandboxes.contains_key(sandbox_id) {
            return Err(sandbox_not_found(sandbox_id));
        }
        self.kill_all(&mut state, sandbox_id);
        if let Some(sandbox) = state.sandboxes.get_mut(sandbox_id)
            && sandbox.status.state == PodSandboxState::SandboxReady as i32
        {
            sandbox.status.state = PodSandboxState::SandboxNotready as i32;
            // As containerd, which reports no IP once the sandbox's network namespace is closed.
            if let Some(network) = sandbox.status.network.as_mut() {
                network.ip.clear();
            }
            self.record(&mut state, || Change::SandboxNotReady { id: sandbox_id.to_string() });
            self.emit(sandbox_id, RuntimeEventKind::Exited);
        }
        lost.map_or(Ok(()), Err)
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.delay().await;
        let lost = self.fault(|s| Call::RemovePodSandbox { name: s.sandbox_name(sandbox_id) }).await?;
        let mut state = self.lock();
        self.sandbox_call(&mut state, sandbox_id, |name| Call::RemovePodSandbox { name });
        // Removing what is gone already succeeds (CRI: idempotent).
        if !state.sandboxes.contains_key(sandbox_id) {
            return lost.map_or(Ok(()), Err);
        }
        self.kill_all(&mut state, sandbox_id);
        let ids = state.sandboxes.get(sandbox_id).map(|s| s.containers.clone()).unwrap_or_default();
        for id in ids {
            self.remove_container_locked(&mut state, &id);
        }
        if let Some(sandbox) = state.sandboxes.remove(sandbox_id) {
            state.sandbox_labels.remove(sandbox_id, &sandbox.status.labels);
            if sandbox.status.state == PodSandboxState::SandboxReady as i32 {
                self.record(&mut state, || Change::SandboxNotReady { id: sandbox_id.to_string() });
                self.emit(sandbox_id, RuntimeEventKind::Exited);
            }
            self.record(&mut state, || Change::SandboxRemoved { id: sandbox_id.to_string() });
        }
        lost.map_or(Ok(()), Err)
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus> {
        self.delay().await;
        self.reads.pod_sandbox_status.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        state.sandboxes.get(sandbox_id).map(|s| s.status.clone()).ok_or_else(|| sandbox_not_found(sandbox_id))
    }

    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>> {
        self.delay().await;
        self.reads.list_pod_sandboxes.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        Ok(state.select_sandboxes(labels).map(|s| s.status.clone()).collect())
    }

    async fn list_pod_sandbox_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.delay().await;
        self.reads.list_states.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        Ok(state.select_sandboxes(labels).map(|s| Listed::from(&s.status)).collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.delay().await;
        let lost = self
            .fault(|_| {
                let m = config.metadata.as_ref();
                Call::CreateContainer {
                    name: m.map(|m| m.name.clone()).unwrap_or_default(),
                    attempt: m.map_or(0, |m| m.attempt),
                }
            })
            .await?;
        // Copied before taking the lock that every pod's calls wait on.
        let metadata = config.metadata.clone().unwrap_or_default();
        let image_spec = config.image.clone().unwrap_or_default();
        let image_name = images::normalize(config.image.as_ref().map_or("", |i| i.image.as_str()));
        let (labels, annotations) = (config.labels.clone(), config.annotations.clone());
        let mut state = self.lock();
        if state.log_calls {
            let call = Call::CreateContainer { name: metadata.name.clone(), attempt: metadata.attempt };
            let pod = Self::pod_of(&state, sandbox_id);
            self.log(&mut state, pod, call);
        }
        let Some(sandbox) = state.sandboxes.get(sandbox_id) else {
            return Err(sandbox_not_found(sandbox_id));
        };
        if sandbox.status.state != PodSandboxState::SandboxReady as i32 {
            return Err(RuntimeError::Failed(format!("sandbox container \"{sandbox_id}\" is not running")));
        }
        if metadata.name.is_empty() {
            return Err(RuntimeError::Failed("container config must include metadata and name".into()));
        }
        // The kubelet bumps the attempt for every new instance; reusing one is a caller bug.
        let reserved = sandbox.containers.iter().filter_map(|id| state.containers.get(id)).any(|c| {
            c.status.metadata.as_ref().is_some_and(|m| m.name == metadata.name && m.attempt == metadata.attempt)
        });
        if reserved {
            return Err(RuntimeError::Failed(format!(
                "failed to reserve container name \"{}_{}_{}\": name is reserved",
                metadata.name, sandbox.pod, metadata.attempt
            )));
        }
        let Some(image_ref) = state.images.get(&*image_name).cloned() else {
            return Err(RuntimeError::NotFound(format!("failed to resolve image \"{}\": not found", image_spec.image)));
        };
        let log_path = if sandbox.log_directory.is_empty() || config.log_path.is_empty() {
            config.log_path.clone()
        } else {
            format!("{}/{}", sandbox.log_directory.trim_end_matches('/'), config.log_path)
        };
        let pod = sandbox.pod.clone();
        let sandbox_key = state.sandboxes.get_key_value(sandbox_id).map(|(k, _)| k.clone());
        let behaviour = Self::next_behaviour(&mut state, &pod, &metadata.name);
        if let Behaviour::FailCreate(message) = behaviour {
            return Err(RuntimeError::Failed(message));
        }
        state.seq += 1;
        let seq = state.seq;
        let id: Arc<str> = images::fake_id(CONTAINER_SALT, seq).into();
        let status = ContainerStatus {
            id: id.to_string(),
            metadata: Some(ContainerMetadata { name: metadata.name, attempt: metadata.attempt }),
            state: ContainerState::ContainerCreated as i32,
            created_at: nanos(self.clock.now()),
            image: Some(image_spec),
            image_id: image_ref.clone(),
            image_ref,
            labels,
            annotations,
            log_path,
            ..Default::default()
        };
        state.container_labels.insert(&id, &status.labels);
        let sandbox_id = sandbox_key.unwrap_or_else(|| sandbox_id.into());
        if let Some(sandbox) = state.sandboxes.get_mut(&*sandbox_id) {
            sandbox.containers.push(id.clone());
        }
        let (name, attempt) = status.metadata.as_ref().map(|m| (m.name.clone(), m.attempt)).unwrap_or_default();
        let created =
            Change::ContainerCreated { id: id.to_string(), sandbox_id: sandbox_id.to_string(), name, attempt };
        state.containers.insert(id.clone(), Container { status, seq, sandbox_id, behaviour, exit_timer: None });
        self.record(&mut state, || created);
        lost.map_or(Ok(id.to_string()), Err)
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        let mut caller_gone = CallerGone { fake: self, container_id, waiting: true };
        self.delay().await;
        let fault = self.fault(|s| Call::StartContainer { name: s.container_name(container_id) }).await;
        caller_gone.waiting = false;
        let lost = fault?;
        let mut state = self.lock();
        self.container_call(&mut state, container_id, |name| Call::StartContainer { name });
        let now = nanos(self.clock.now());
        let Some((id, c)) = state.containers.get_key_value(container_id) else {
            return Err(container_not_found(container_id));
        };
        let id = id.clone();
        if c.status.state != ContainerState::ContainerCreated as i32 {
            return Err(RuntimeError::Failed(format!(
                "container \"{container_id}\" is in {} state",
                state_name(c.status.state)
            )));
        }
        let sandbox_ready =
            state.sandboxes.get(&*c.sandbox_id).is_some_and(|s| s.status.state == PodSandboxState::SandboxReady as i32);
        if !sandbox_ready {
            return Err(RuntimeError::Failed(format!("sandbox container \"{}\" is not running", c.sandbox_id)));
        }
        let behaviour = c.behaviour.clone();
        let Some(c) = state.containers.get_mut(container_id) else {
            return Err(container_not_found(container_id));
        };
        if let Behaviour::FailStart(message) = behaviour {
            c.status.state = ContainerState::ContainerExited as i32;
            c.status.exit_code = START_ERROR_CODE;
            c.status.reason = "StartError".into();
            c.status.message.clone_from(&message);
            c.status.finished_at = now;
            let reason = c.status.reason.clone();
            let exited = Change::ContainerExited { id: id.to_string(), exit_code: START_ERROR_CODE, reason };
            self.record(&mut state, || exited);
            return Err(RuntimeError::Failed(message));
        }
        c.status.state = ContainerState::ContainerRunning as i32;
        c.status.started_at = now;
        self.record(&mut state, || Change::ContainerStarted { id: id.to_string() });
        self.emit(container_id, RuntimeEventKind::Started);
        match behaviour {
            Behaviour::Exit { code, after } => self.schedule_exit(&mut state, &id, code, exit_reason(code), after),
            Behaviour::Oom { after } => self.schedule_exit(&mut state, &id, SIGKILL_CODE, "OOMKilled", after),
            _ => {}
        }
        lost.map_or(Ok(()), Err)
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.delay().await;
        let lost = self.fault(|s| Call::StopContainer { name: s.container_name(container_id), timeout }).await?;
        let ignores_term = {
            let mut state = self.lock();
            self.container_call(&mut state, container_id, |name| Call::StopContainer { name, timeout });
            let Some(c) = state.containers.get(container_id) else {
                return Err(container_not_found(container_id));
            };
            if !c.is_running() {
                return lost.map_or(Ok(()), Err);
            }
            let ignores_term = c.behaviour == Behaviour::IgnoreTerm;
            if !ignores_term {
                self.finish(&mut state, container_id, SIGTERM_CODE, "Error");
            }
            ignores_term
        };
        if ignores_term {
            // StopContainer blocks until the container is gone: here, until SIGKILL.
            if !timeout.is_zero() {
                tokio::time::sleep(timeout).await;
            }
            let mut state = self.lock();
            self.finish(&mut state, container_id, SIGKILL_CODE, "Error");
        }
        lost.map_or(Ok(()), Err)
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.delay().await;
        let lost = self.fault(|s| Call::RemoveContainer { name: s.container_name(container_id) }).await?;
        let mut state = self.lock();
        self.container_call(&mut state, container_id, |name| Call::RemoveContainer { name });
        // containerd force-stops a running container before removing it.
        self.finish(&mut state, container_id, SIGKILL_CODE, "Error");
        self.remove_container_locked(&mut state, container_id);
        lost.map_or(Ok(()), Err)
    }

    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &crate::cri_api::LinuxContainerResources,
    ) -> RuntimeResult<()> {
        self.delay().await;
        let call = |name| Call::UpdateContainerResources {
            name,
            cpu_quota: resources.cpu_quota,
            cpu_shares: resources.cpu_shares,
            memory_limit: resources.memory_limit_in_bytes,
        };
        let lost = self.fault(|s| call(s.container_name(container_id))).await?;
        let mut state = self.lock();
        self.container_call(&mut state, container_id, call);
        let Some(c) = state.containers.get_mut(container_id) else {
            return Err(container_not_found(container_id));
        };
        if c.status.state != ContainerState::ContainerRunning as i32 {
            return Err(RuntimeError::Failed(format!(
                "container \"{container_id}\" is in {} state",
                state_name(c.status.state)
            )));
        }
        c.status.resources =
            Some(crate::cri_api::ContainerResources { linux: Some(resources.clone()), ..Default::default() });
        lost.map_or(Ok(()), Err)
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.delay().await;
        self.reads.container_status.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        state.containers.get(container_id).map(|c| c.status.clone()).ok_or_else(|| container_not_found(container_id))
    }

    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>> {
        self.delay().await;
        self.reads.list_containers.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        Ok(state.select_containers(labels).map(|c| c.status.clone()).collect())
    }

    async fn list_container_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.delay().await;
        self.reads.list_states.fetch_add(1, Ordering::Relaxed);
        let state = self.lock();
        Ok(state.select_containers(labels).map(|c| Listed::from(&c.status)).collect())
    }

    async fn list_container_stats(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerStats>> {
        self.delay().await;
        self.reads.list_container_stats.fetch_add(1, Ordering::Relaxed);
        let now = nanos(self.clock.now());
        let state = self.lock();
        let running = state.select_containers(labels).filter(|c| c.is_running());
        Ok(running
            .map(|c| {
                let usage = state.usage.get(c.name()).copied().unwrap_or_default();
                container_stats(c, usage, state.writable_layers.get(c.name()).copied(), now)
            })
            .collect())
    }

    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult> {
        self.delay().await;
        if let Some(e) = self.fault(|s| Call::ExecSync { name: s.container_name(container_id) }).await? {
            return Err(e);
        }
        let step = {
            let mut state = self.lock();
            self.container_call(&mut state, container_id, |name| Call::ExecSync { name });
            let Some(c) = state.containers.get(container_id) else {
                return Err(container_not_found(container_id));
            };
            if !c.is_running() {
                return Err(RuntimeError::Failed(format!(
                    "container \"{container_id}\" is in {} state",
                    state_name(c.status.state)
                )));
            }
            let name = c.name().to_string();
            match state.exec_scripts.get_mut(&name) {
                Some(ExecScript::Steps(script)) => Ok(script.next()),
                Some(ExecScript::Func(f)) => Err(f.clone()),
                None => Ok(None),
            }
        };
        let step = match step {
            Ok(step) => step.unwrap_or_else(|| ExecBehaviour::exit(0)),
            Err(f) => f(cmd),
        };
        match step {
            ExecBehaviour::Reply(result) => Ok(result),
            ExecBehaviour::Fail(e) => Err(e),
            ExecBehaviour::Slow(takes, result) => {
                if !timeout.is_zero() && takes > timeout {
                    tokio::time::sleep(timeout).await;
                    // containerd's text, with the timeout in whole seconds as CRI carries it.
                    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
                    return Err(RuntimeError::DeadlineExceeded(format!("timeout {secs}s exceeded")));
                }
                tokio::time::sleep(takes).await;
                Ok(result)
            }
        }
    }

    async fn exec(&self, req: &ExecRequest) -> RuntimeResult<String> {
        self.delay().await;
        let mut state = self.lock();
        self.container_call(&mut state, &req.container_id, |name| Call::Exec {
            name,
            cmd: req.cmd.clone(),
            stdin: req.stdin,
            stdout: req.stdout,
            stderr: req.stderr,
            tty: req.tty,
        });
        running(&state, &req.container_id)?;
        streaming_url(&mut state, "exec")
    }

    async fn attach(&self, req: &AttachRequest) -> RuntimeResult<String> {
        self.delay().await;
        let mut state = self.lock();
        self.container_call(&mut state, &req.container_id, |name| Call::Attach {
            name,
            stdin: req.stdin,
            stdout: req.stdout,
            stderr: req.stderr,
            tty: req.tty,
        });
        running(&state, &req.container_id)?;
        streaming_url(&mut state, "attach")
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.delay().await;
        let mut state = self.lock();
        self.sandbox_call(&mut state, sandbox_id, |name| Call::PortForward { name, ports: ports.to_vec() });
        if !state.sandboxes.contains_key(sandbox_id) {
            return Err(sandbox_not_found(sandbox_id));
        }
        streaming_url(&mut state, "portforward")
    }

    fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.events.subscribe()
    }
}

#[async_trait]
impl ImageService for FakeRuntime {
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>> {
        self.delay().await;
        self.reads.image_status.fetch_add(1, Ordering::Relaxed);
        Ok(self.lock().images.get(&*images::normalize(image)).cloned())
    }

    async fn pull_image(
        &self,
        spec: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.delay().await;
        let image = spec.image.as_str();
        let name = images::normalize(image).into_owned();
        let takes = {
            let mut state = self.lock();
            if state.log_calls {
                let pod = sandbox_config.metadata.as_ref().map(|m| Arc::from(m.name.as_str()));
                self.log(
                    &mut state,
                    pod,
                    Call::PullImage { image: image.to_string(), runtime_handler: spec.runtime_handler.clone() },
                );
            }
            let Some(rule) = state.pulls.get(&name) else {
                return Err(RuntimeError::Failed(format!(
                    "failed to pull and unpack image \"{name}\": failed to resolve reference \"{name}\": {name}: not found"
                )));
            };
            if let Some((user, password)) = &rule.credentials {
                let given = auth.map(|a| (a.username.as_str(), a.password.as_str()));
                if given != Some((user.as_str(), password.as_str())) {
                    return Err(RuntimeError::Failed(format!(
                        "failed to pull and unpack image \"{name}\": failed to resolve reference \"{name}\": \
                         pulling from host failed with status code [manifests]: 401 Unauthorized"
                    )));
                }
            }
            rule.takes
        };
        if !takes.is_zero() {
            tokio::time::sleep(takes).await;
        }
        let image_ref = images::fake_digest(&name);
        self.lock().images.insert(name, image_ref.clone());
        Ok(image_ref)
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ListedImage>> {
        self.delay().await;
        let state = self.lock();
        let mut by_ref: BTreeMap<&str, ListedImage> = BTreeMap::new();
        for (name, image_ref) in &state.images {
            let image = by_ref.entry(image_ref).or_insert_with(|| ListedImage {
                id: image_ref.clone(),
                size: state.image_sizes.get(image_ref).copied().unwrap_or_default(),
                pinned: state.pinned_images.contains(image_ref),
                ..Default::default()
            });
            image.repo_tags.push(name.clone());
        }
        Ok(by_ref
            .into_values()
            .map(|mut i| {
                i.repo_tags.sort_unstable();
                i
            })
            .collect())
    }

    async fn image_fs_info(&self) -> RuntimeResult<ImageFs> {
        self.delay().await;
        let state = self.lock();
        let Some((capacity, other_used)) = state.image_fs else {
            return Err(RuntimeError::Unimplemented("ImageFsInfo".to_string()));
        };
        let present: HashSet<&String> = state.images.values().collect();
        let used: u64 = present.iter().filter_map(|r| state.image_sizes.get(*r)).sum();
        Ok(ImageFs {
            mountpoint: "/fake/images".to_string(),
            used_bytes: used,
            capacity_bytes: capacity,
            available_bytes: capacity.saturating_sub(other_used).saturating_sub(used),
        })
    }

    /// Removes every name of the image with this id, or the image this name resolves to, as
    /// containerd does; an image in use by a container is removed all the same.
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.delay().await;
        let mut state = self.lock();
        self.log(&mut state, None, Call::RemoveImage { image: image.to_string() });
        let image_ref = match state.images.get(&*images::normalize(image)) {
            Some(r) => r.clone(),
            None => image.to_string(),
        };
        state.images.retain(|_, r| *r != image_ref);
        Ok(())
    }
}

/// A `StartContainer` whose caller goes away while it is under way (podwright killed during
/// the call): containerd 1.6 leaves the container exited with `StartError` and exit code 128,
/// "context canceled", never run.
struct CallerGone<'a> {
    fake: &'a FakeRuntime,
    container_id: &'a str,
    /// The call has not acted yet.
    waiting: bool,
}

impl Drop for CallerGone<'_> {
    fn drop(&mut self) {
        if !self.waiting {
            return;
        }
        let mut state = self.fake.lock();
        let now = nanos(self.fake.clock.now());
        let Some(c) = state.containers.get_mut(self.container_id) else { return };
        if c.status.state != ContainerState::ContainerCreated as i32 {
            return;
        }
        c.status.state = ContainerState::ContainerExited as i32;
        c.status.exit_code = START_ERROR_CODE;
        c.status.reason = "StartError".into();
        c.status.message =
            "failed to create containerd task: failed to create shim task: context canceled: unknown".into();
        c.status.finished_at = now;
        let exited = Change::ContainerExited {
            id: self.container_id.to_string(),
            exit_code: START_ERROR_CODE,
            reason: "StartError".into(),
        };
        self.fake.record(&mut state, || exited);
        self.fake.emit(self.container_id, RuntimeEventKind::Exited);
    }
}

/// containerd refuses streams into a container that is not running.
fn running(state: &State, container_id: &str) -> RuntimeResult<()> {
    let Some(c) = state.containers.get(container_id) else {
        return Err(container_not_found(container_id));
    };
    if !c.is_running() {
        return Err(RuntimeError::Failed(format!(
            "container \"{container_id}\" is in {} state",
            state_name(c.status.state)
        )));
    }
    Ok(())
}

/// A fresh single-use URL on the scripted streaming server.
fn streaming_url(state: &mut State, kind: &str) -> RuntimeResult<String> {
    let Some(base) = state.streaming.clone() else {
        return Err(RuntimeError::Unimplemented(format!("{kind}: the fake runtime has no streaming server")));
    };
    state.seq += 1;
    Ok(format!("{base}/{kind}/{:08x}", state.seq))
}

/// A running container's stats at `now` (nanoseconds since the epoch) under `usage`, its
/// writable layer holding `layer` bytes if scripted.
fn container_stats(c: &Container, usage: FakeUsage, layer: Option<u64>, now: i64) -> ContainerStats {
    let value = |value| Some(UInt64Value { value });
    let ran = u64::try_from(now.saturating_sub(c.status.started_at)).unwrap_or(0);
    let cpu_nanos = u64::try_from(u128::from(ran) * u128::from(usage.millicores) / 1000).unwrap_or(u64::MAX);
    ContainerStats {
        attributes: Some(ContainerAttributes {
            id: c.status.id.clone(),
            metadata: c.status.metadata.clone(),
            labels: c.status.labels.clone(),
            annotations: c.status.annotations.clone(),
        }),
        cpu: Some(CpuUsage { timestamp: now, usage_core_nano_seconds: value(cpu_nanos), usage_nano_cores: None }),
        memory: Some(MemoryUsage {
            timestamp: now,
            working_set_bytes: value(usage.working_set_bytes),
            usage_bytes: value(usage.working_set_bytes),
            ..Default::default()
        }),
        writable_layer: layer.map(|bytes| FilesystemUsage {
            timestamp: now,
            used_bytes: value(bytes),
            ..Default::default()
        }),
        swap: None,
    }
}
