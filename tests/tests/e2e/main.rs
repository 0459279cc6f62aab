//! The end-to-end stories, one module (one file here) each, in one test binary: the harness is
//! linked once instead of once per story, and the stories' tests share one pool of test threads.
//! A new story is a file in this directory plus its `mod` line below; run one story with
//! `cargo test -p hangar-tests --test e2e <story>::`.
//!
//! Two stories stay binaries of their own in `tests/tests/`, because they change this process for
//! every test beside them: `escape.rs` moves the test process into a cgroup while it starts a
//! hangar (a test starting one at that moment would land there too), and `connections.rs` holds
//! thousands of sockets and floods the API, which would starve the bounded waits of the others.

mod audit_api;
mod audit_secrets;
mod auth;
mod bad_input;
mod box_fences;
mod browser;
mod call_request;
mod cancellation;
mod class_cases;
mod cli;
mod client_questions;
mod config_file;
mod config_watch;
mod connect_asks;
mod connect_browser;
mod crash;
mod cross_site;
mod custom_headers;
mod dead_reasons;
mod dead_words;
mod declared_names;
mod declared_only;
mod documented;
mod drain;
mod echo_bounds;
mod egress_content;
mod eras;
mod escape_window;
mod event_views;
mod events;
mod front_door;
mod front_door_routing;
mod garbage;
mod handshake_timeout;
mod hangar_call_questions;
mod health;
mod hog_call;
mod how_it_ended;
mod http_news;
mod identity_quotas;
mod ids;
mod introspection;
mod journal_audit;
mod journal_bounds;
mod journal_crash;
mod journal_damage;
mod journal_gap;
mod journal_migration;
mod journal_state;
mod json_logs;
mod last_event_id;
mod legacy_relay;
mod legacy_sessions;
mod lifecycle;
mod limits;
mod listen_resources;
mod long_lines;
mod managed_http;
mod many_hangars;
mod memory_key;
mod metrics;
mod oauth;
mod oauth_boundaries;
mod one_dispatcher;
mod oversize;
mod paths;
mod pins;
mod preflight;
mod profiles;
mod readiness;
mod real_clients;
mod redaction;
mod reload;
mod restart_memory;
mod sandbox;
mod sandbox_limits;
mod scaling;
mod security;
mod session_bounds;
mod shutdown;
mod socket_boundary;
mod stable_names;
mod starts;
mod status_page;
mod stored_credentials;
mod streamed_calls;
mod systemd;
mod task_news;
mod tasks;
mod terminal_text;
mod token_exchange;
mod traces;
mod upstream_connect;
mod upstream_credentials;
mod upstream_login;
mod upstream_oauth;
mod url_elicitations;
mod view_lists;
