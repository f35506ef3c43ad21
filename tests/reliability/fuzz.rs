//! Property tests: the JSON-RPC framing of `/mcp`, the argument checker of
//! every op, and every op's handler behind the pipeline never panic, and
//! answer every input with a result or a typed refusal (never a 5xx).

use std::sync::Arc;

use loom_core::{Registry, Transport};
use loom_server::pipeline::{self, CallRequest};
use loom_server::transport::mcp::jsonrpc::{self, Body, Message, code};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value, nested a few levels, with awkward strings and numbers.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        prop_oneof![
            Just("\u{0}"),
            Just("\u{202e}rtl"),
            Just("\u{feff}"),
            Just("💥🧵"),
            Just("e\u{301}"),
            Just("\\u0000"),
            Just("../../etc/passwd"),
            Just("' OR 1=1 --"),
            Just("2.0"),
            Just("tools/call"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("jsonrpc".to_owned()),
                    Just("id".to_owned()),
                    Just("method".to_owned()),
                    Just("params".to_owned()),
                    Just("result".to_owned()),
                    Just("error".to_owned()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON-RPC-shaped message with each field sometimes wrong.
pub fn rpc_message() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just(json!("2.0")), Just(json!("1.0")), json_value()],
        prop::option::of(json_value()),
        prop::option::of(prop_oneof![
            Just(json!("tools/call")),
            Just(json!("initialize")),
            json_value()
        ]),
        prop::option::of(json_value()),
    )
        .prop_map(|(v, id, method, params)| {
            let mut m = Map::new();
            m.insert("jsonrpc".into(), v);
            if let Some(id) = id {
                m.insert("id".into(), id);
            }
            if let Some(method) = method {
                m.insert("method".into(), method);
            }
            if let Some(params) = params {
                m.insert("params".into(), params);
            }
            Value::Object(m)
        })
}

fn check_message(m: &Message) {
    match m {
        Message::Request { params, .. } | Message::Notification { params, .. } => {
            assert!(params.is_object(), "params handed on are an object");
        }
        Message::Response | Message::Invalid { .. } => {}
    }
}

fn check_body(bytes: &[u8]) {
    match jsonrpc::parse(bytes) {
        Ok(Body::Single(m)) => check_message(&m),
        Ok(Body::Batch(ms)) => {
            assert!((1..=jsonrpc::MAX_BATCH).contains(&ms.len()));
            ms.iter().for_each(check_message);
        }
        Err(e) => {
            assert!([code::PARSE_ERROR, code::INVALID_REQUEST].contains(&e.code));
            let r = e.response();
            assert_eq!(r["jsonrpc"], "2.0");
            assert!(r.get("id").is_none(), "a framing error has no id");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn jsonrpc_parse_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_body(&bytes);
    }

    #[test]
    fn jsonrpc_parse_answers_every_json_value(v in json_value()) {
        check_body(v.to_string().as_bytes());
    }

    #[test]
    fn jsonrpc_parse_answers_every_message_and_batch(
        batch in prop::collection::vec(rpc_message(), 0..70),
        single in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let text = if single && !batch.is_empty() { batch[0].to_string() } else { Value::Array(batch).to_string() };
        check_body(text.as_bytes());
        // and every truncation of it
        let end = cut.index(text.len() + 1);
        check_body(&text.as_bytes()[..end]);
    }

    #[test]
    fn the_argument_checker_never_panics(op in 0usize..1000, args in json_value(), fields in prop::collection::vec((any::<prop::sample::Index>(), json_value()), 0..6)) {
        let registry = registry();
        let op = &registry.ops()[op % registry.ops().len()];
        let v = op.validator();
        let _ = v.check(&op.name, &args, !op.read_only());
        // arguments that name the op's own fields, with values of any type
        let known: Vec<&String> = v.required().iter().chain(v.optional()).collect();
        let mut m = Map::new();
        if !known.is_empty() {
            for (i, value) in fields {
                m.insert(known[i.index(known.len())].clone(), value);
            }
        }
        let _ = v.check(&op.name, &Value::Object(m), !op.read_only());
    }
}

fn registry() -> &'static Registry {
    loom_tests::link();
    Registry::global().expect("a valid registry")
}

/// Every op's handler, behind the whole pipeline, with arguments built
/// from its own fields and values of any type: never a panic, never a 5xx.
#[test]
fn every_op_answers_hostile_arguments_without_a_fault() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let servers = rt.block_on(loom_tests::servers(|c| {
        c.auth_required = false;
        loom_tests::generous(c);
    }));
    let registry = registry();
    let mut config = ProptestConfig::with_cases(256);
    config.failure_persistence = None;
    for t in servers {
        let app = Arc::clone(&t.server.app);
        let name = t.name();
        let mut runner = proptest::test_runner::TestRunner::new(config.clone());
        let strategy = (
            0usize..1000,
            prop::collection::vec((any::<prop::sample::Index>(), json_value()), 0..6),
        );
        runner
            .run(&strategy, |(op, fields)| {
                let op = &registry.ops()[op % registry.ops().len()];
                let v = op.validator();
                let known: Vec<&String> = v.required().iter().chain(v.optional()).collect();
                let mut args = Map::new();
                if !known.is_empty() {
                    for (i, value) in fields {
                        args.insert(known[i.index(known.len())].clone(), value);
                    }
                }
                let args = Value::Object(args);
                let outcome = rt.block_on(pipeline::call_to_completion(
                    app.clone(),
                    CallRequest {
                        op,
                        args: args.clone(),
                        caller: None,
                        transport: Transport::Local,
                        request_id: "fuzz".into(),
                        idempotency_key: None,
                        session_id: None,
                        run_id: None,
                        default_agent: None,
                        policy: pipeline::CallPolicy::default(),
                        refuse: None,
                        cancel: None,
                    },
                ));
                prop_assert!(
                    outcome.status < 500,
                    "{name}: {} {args} answered {}: {:?}",
                    op.name,
                    outcome.status,
                    outcome.result.err().map(|e| format!(
                        "{} {:?}",
                        e.message(),
                        e.internal_message()
                    ))
                );
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(t.server.shutdown());
    }
}
