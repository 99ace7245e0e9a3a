//! A TCP proxy that can cut every open connection at once and refuse new ones for a
//! while: from a client's side, what a database server restart looks like.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy; stops when dropped.
pub struct TcpProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Cancelled to cut the connections open now; replaced by a fresh token each cut.
    live: Arc<Mutex<CancellationToken>>,
    /// New connections are dropped at once until then.
    down_until: Arc<Mutex<Instant>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.live.lock().expect("proxy lock").cancel();
        self.task.abort();
    }
}

impl TcpProxy {
    /// Starts a proxy to `upstream` on a free loopback port.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind TCP proxy");
        let addr = listener.local_addr().expect("TCP proxy address");
        let live = Arc::new(Mutex::new(CancellationToken::new()));
        let down_until = Arc::new(Mutex::new(Instant::now()));
        let (accept_live, accept_down) = (live.clone(), down_until.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if Instant::now() < *accept_down.lock().expect("proxy lock") {
                    continue;
                }
                let cut = accept_live.lock().expect("proxy lock").clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = cut.cancelled() => {}
                    }
                });
            }
        });
        Self {
            addr,
            live,
            down_until,
            task,
        }
    }

    /// Starts a proxy in front of the server of a database `url`; returns it and the URL
    /// that reaches the same database through it.
    pub async fn in_front_of(url: &str) -> (Self, String) {
        let mut through = url::Url::parse(url).expect("database URL");
        let server: SocketAddr = format!(
            "{}:{}",
            through.host_str().expect("database host"),
            through.port().unwrap_or(5432)
        )
        .parse()
        .expect("database address");
        let proxy = Self::start(server).await;
        through.set_port(Some(proxy.addr.port())).expect("set port");
        (proxy, through.to_string())
    }

    /// Cuts every open connection, and refuses new ones for `down`.
    pub fn restart(&self, down: Duration) {
        *self.down_until.lock().expect("proxy lock") = Instant::now() + down;
        let mut live = self.live.lock().expect("proxy lock");
        live.cancel();
        *live = CancellationToken::new();
    }
}
