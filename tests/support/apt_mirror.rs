//! A small Debian mirror on loopback serving made-up suites: each suite's InRelease listing its
//! `main/binary-amd64/Packages` index (gzip or xz) with the index's real SHA256, as Debian's
//! archive lays them out. What it was asked is counted; a mirror can be made to answer every
//! request with an error, or to cut the connection of the next few without answering.

#![allow(dead_code)]

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How a suite's index is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    Gzip,
    Xz,
}

/// A running mirror; it serves until the process ends.
pub struct AptMirror {
    /// `http://127.0.0.1:PORT/debian`
    pub url: String,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    requests: Arc<Mutex<Vec<String>>>,
    failing: Arc<AtomicU16>,
    to_cut: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
}

impl AptMirror {
    pub fn start() -> AptMirror {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/debian", listener.local_addr().unwrap());
        let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let failing = Arc::new(AtomicU16::new(0));
        let to_cut = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let (files_here, requests_here, failing_here, to_cut_here, served_here) = (
            files.clone(),
            requests.clone(),
            failing.clone(),
            to_cut.clone(),
            served.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                    line.clear();
                }
                let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
                requests_here.lock().unwrap().push(path.clone());
                let cut = to_cut_here
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                        left.checked_sub(1)
                    })
                    .is_ok();
                if cut {
                    // Gone without a word, as a cache whose upstream connection broke.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let body = files_here.lock().unwrap().get(&path).cloned();
                let failing = failing_here.load(Ordering::SeqCst);
                let head = match (&body, failing != 0) {
                    (_, true) => format!("HTTP/1.1 {failing} Failing on purpose\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
                    (Some(body), false) => {
                        served_here.fetch_add(1, Ordering::SeqCst);
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                    }
                    (None, false) => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
                };
                let _ = stream.write_all(head.as_bytes());
                if let (Some(body), false) = (body, failing != 0) {
                    let _ = stream.write_all(&body);
                }
            }
        });
        AptMirror {
            url,
            files,
            requests,
            failing,
            to_cut,
            served,
        }
    }

    /// Publishes (or replaces) `suite` with `packages` (name, version), several versions of one
    /// name allowed.
    pub fn publish(&self, suite: &str, packages: &[(&str, &str)], published: Published) {
        let mut index = String::new();
        for (name, version) in packages {
            index.push_str(&format!(
                "Package: {name}\nVersion: {version}\nArchitecture: amd64\nDescription: {name}, made up\n\n"
            ));
        }
        let (file, compressed) = match published {
            Published::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(index.as_bytes()).unwrap();
                ("Packages.gz", encoder.finish().unwrap())
            }
            Published::Xz => {
                let mut out = Vec::new();
                lzma_rs::xz_compress(&mut BufReader::new(index.as_bytes()), &mut out).unwrap();
                ("Packages.xz", out)
            }
        };
        let in_release = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Made up\nCodename: {suite}\nSHA256:\n {} {} main/binary-amd64/Packages\n {} {} main/binary-amd64/{file}\n-----BEGIN PGP SIGNATURE-----\n\nnot a signature\n-----END PGP SIGNATURE-----\n",
            hex::encode(Sha256::digest(index.as_bytes())),
            index.len(),
            hex::encode(Sha256::digest(&compressed)),
            compressed.len(),
        );
        let prefix = format!("/debian/dists/{suite}");
        let mut files = self.files.lock().unwrap();
        files.retain(|path, _| !path.starts_with(&format!("{prefix}/")));
        files.insert(format!("{prefix}/InRelease"), in_release.into_bytes());
        files.insert(format!("{prefix}/main/binary-amd64/{file}"), compressed);
    }

    /// Publishes bookworm, bookworm-updates (xz) and bookworm-security (xz), the suites a
    /// baked image is built from, with `release` in the release and `security` in security.
    pub fn publish_bookworm(&self, release: &[(&str, &str)], security: &[(&str, &str)]) {
        self.publish("bookworm", release, Published::Gzip);
        self.publish("bookworm-updates", &[], Published::Xz);
        self.publish("bookworm-security", security, Published::Xz);
    }

    /// Serves `bytes` at `path` (under `/debian`), whatever a Release says of it.
    pub fn replace(&self, path: &str, bytes: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_string(), bytes);
    }

    /// Answers every request with a 503, a failure that may pass, from now on (or again
    /// normally).
    pub fn fail(&self, failing: bool) {
        self.answer_every_request_with(failing.then_some(503));
    }

    /// Answers every request with HTTP `status` from now on (`None`: again normally).
    pub fn answer_every_request_with(&self, status: Option<u16>) {
        self.failing.store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// Closes the connection of each of the next `requests` without answering.
    pub fn cut_next(&self, requests: usize) {
        self.to_cut.store(requests, Ordering::SeqCst);
    }

    /// The paths asked so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// How many files it served whole.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}
