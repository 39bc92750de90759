//! An in-process [`Bootstrap`] for tests: the ranks of a job are threads of one process
//! sharing one store. Device and mpi-core tests use it so that a multi-rank job needs no
//! launcher.

use crate::{Bootstrap, DeviceError, Result};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

#[derive(Default)]
struct Shared {
    kv: HashMap<String, String>,
    /// Number of ranks that have entered the current barrier round.
    arrived: usize,
    /// Barrier round counter (generation), so a rank can leave while others re-enter.
    round: u64,
}

/// One rank's handle to the shared store. Create all handles with [`ThreadKvs::job`].
pub struct ThreadKvs {
    rank: usize,
    size: usize,
    shared: Arc<(Mutex<Shared>, Condvar)>,
}

impl ThreadKvs {
    /// Returns one handle per rank of a job of `size` ranks (index = rank).
    pub fn job(size: usize) -> Vec<ThreadKvs> {
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        (0..size)
            .map(|rank| ThreadKvs {
                rank,
                size,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Bootstrap for ThreadKvs {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        let mut s = self.shared.0.lock().unwrap();
        s.kv.insert(key.to_string(), value.to_string());
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        let (lock, cv) = &*self.shared;
        let mut s = lock.lock().unwrap();
        let round = s.round;
        s.arrived += 1;
        if s.arrived == self.size {
            s.arrived = 0;
            s.round += 1;
            cv.notify_all();
        } else {
            while s.round == round {
                s = cv.wait(s).unwrap();
            }
        }
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String> {
        let s = self.shared.0.lock().unwrap();
        s.kv.get(key)
            .cloned()
            .ok_or_else(|| DeviceError::Bootstrap(format!("key {key} not found")))
    }
}
