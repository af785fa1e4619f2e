//! A warm pool of kernels of one image: `size` kernels are kept ready, each
//! `acquire` hands one out (never twice) and a replacement starts in the
//! background. Shutdown waits for kernels still starting, so no process is
//! left behind.

use std::sync::Arc;

use tokio::sync::{mpsc, watch, Mutex, Semaphore};
use tokio::task::JoinHandle;

use super::launch::KernelSpec;
use super::session::{Kernel, KernelOptions};
use super::KernelError;
use crate::sandbox::Sandbox;

pub struct KernelPool {
    ready: Mutex<mpsc::Receiver<Result<Kernel, KernelError>>>,
    slots: Arc<Semaphore>,
    stop: watch::Sender<bool>,
    filler: Mutex<Option<JoinHandle<()>>>,
}

impl KernelPool {
    /// Starts filling the pool; returns at once.
    pub fn start(
        spec: Arc<KernelSpec>,
        sandbox: Arc<dyn Sandbox>,
        options: KernelOptions,
        size: usize,
    ) -> Self {
        let size = size.max(1);
        let slots = Arc::new(Semaphore::new(size));
        let (tx, rx) = mpsc::channel(size);
        let (stop, mut stopped) = watch::channel(false);
        let filler_slots = slots.clone();
        let filler = tokio::spawn(async move {
            let mut starting = tokio::task::JoinSet::new();
            loop {
                let permit = tokio::select! {
                    p = filler_slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = stopped.wait_for(|s| *s) => break,
                };
                // The slot is returned by `acquire`, not when this task ends.
                permit.forget();
                let (spec, sandbox, options, tx) =
                    (spec.clone(), sandbox.clone(), options.clone(), tx.clone());
                starting.spawn(async move {
                    let kernel = Kernel::start(spec, sandbox.as_ref(), options).await;
                    if let Err(mpsc::error::SendError(Ok(kernel))) = tx.send(kernel).await {
                        kernel.shutdown().await;
                    }
                });
                // Reap finished starts so the set does not grow.
                while starting.try_join_next().is_some() {}
            }
            // Let kernels that are starting finish, so they can be shut down.
            while starting.join_next().await.is_some() {}
        });
        Self {
            ready: Mutex::new(rx),
            slots,
            stop,
            filler: Mutex::new(Some(filler)),
        }
    }

    /// Hands out a ready kernel (waiting for one if none is ready yet) and
    /// starts its replacement.
    pub async fn acquire(&self) -> Result<Kernel, KernelError> {
        let next = self.ready.lock().await.recv().await;
        self.slots.add_permits(1);
        next.unwrap_or_else(|| Err(KernelError::Launch("the kernel pool is shut down".into())))
    }

    /// Stops refilling and shuts down every kernel the pool still holds.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        if let Some(filler) = self.filler.lock().await.take() {
            let _ = filler.await;
        }
        let mut ready = self.ready.lock().await;
        ready.close();
        while let Some(kernel) = ready.recv().await {
            if let Ok(kernel) = kernel {
                kernel.shutdown().await;
            }
        }
    }
}
