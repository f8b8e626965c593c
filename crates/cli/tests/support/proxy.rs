//! A TCP proxy on loopback that a test puts between the scheduler and
//! the API server, to break its connections on purpose: pause every
//! connection for a while, close them all mid-stream, or leave them
//! half-open (open, but nothing ever passes again). TLS goes through it
//! untouched: the API server's certificate names 127.0.0.1, whatever
//! the port.

#![allow(dead_code)] // each test binary uses part of it

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    target: SocketAddr,
    paused: Mutex<bool>,
    resumed: Condvar,
    conns: Mutex<Vec<Conn>>,
    stop: AtomicBool,
}

struct Conn {
    client: TcpStream,
    server: TcpStream,
    /// Half-open: nothing is forwarded any more, both ends stay open.
    frozen: Arc<AtomicBool>,
    closed: Arc<AtomicBool>,
}

/// How long a forwarding thread blocks in a read before it looks at the
/// proxy's state again.
const POLL: Duration = Duration::from_millis(100);

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:target_port`.
    pub fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("proxy: binding: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_else(|e| panic!("proxy: {e}"));
        let shared = Arc::new(Shared {
            target: SocketAddr::from(([127, 0, 0, 1], target_port)),
            paused: Mutex::new(false),
            resumed: Condvar::new(),
            conns: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(s.target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                s.add(client, server);
            }
        });
        Proxy { port, shared }
    }

    /// Stops forwarding on every connection (they stay open; bytes wait
    /// in the kernel's buffers) until [`Proxy::resume`].
    pub fn pause(&self) {
        *lock(&self.shared.paused) = true;
    }

    pub fn resume(&self) {
        *lock(&self.shared.paused) = false;
        self.shared.resumed.notify_all();
    }

    /// Closes every open connection in both directions, mid-stream;
    /// returns how many there were.
    pub fn reset(&self) -> usize {
        let mut conns = lock(&self.shared.conns);
        let n = conns.len();
        for c in conns.drain(..) {
            c.close();
        }
        n
    }

    /// Half-opens every open connection: from now on nothing passes
    /// through it either way, but neither end sees it closed (a peer
    /// gone without a word, a firewall dropping a flow). New connections
    /// work. Returns how many were frozen.
    pub fn freeze(&self) -> usize {
        let mut conns = lock(&self.shared.conns);
        conns.retain(|c| !c.closed.load(Ordering::SeqCst));
        for c in conns.iter() {
            c.frozen.store(true, Ordering::SeqCst);
        }
        conns.len()
    }

    /// Connections open now (frozen ones included).
    pub fn connections(&self) -> usize {
        let mut conns = lock(&self.shared.conns);
        conns.retain(|c| !c.closed.load(Ordering::SeqCst));
        conns.len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.resume();
        // Wakes the accepting thread so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.reset();
    }
}

impl Conn {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

impl Shared {
    fn add(self: &Arc<Self>, client: TcpStream, server: TcpStream) {
        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
        let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) else { return };
        let frozen = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicBool::new(false));
        for (from, to) in [(c2, s2), (s3, c3)] {
            let (me, frozen, closed) = (self.clone(), frozen.clone(), closed.clone());
            std::thread::spawn(move || me.forward(from, to, &frozen, &closed));
        }
        lock(&self.conns).push(Conn { client, server, frozen, closed });
    }

    fn forward(&self, mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool, closed: &AtomicBool) {
        let _ = from.set_read_timeout(Some(POLL));
        let mut buf = vec![0u8; 64 << 10];
        loop {
            if self.stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst) {
                break;
            }
            if frozen.load(Ordering::SeqCst) {
                std::thread::sleep(POLL);
                continue;
            }
            {
                let paused = lock(&self.paused);
                if *paused {
                    let _ = self.resumed.wait_timeout(paused, POLL);
                    continue;
                }
            }
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        if !frozen.load(Ordering::SeqCst) {
            closed.store(true, Ordering::SeqCst);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
