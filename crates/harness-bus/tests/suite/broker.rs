//! The broker client against the scripted broker: results, refusals with their code, and every
//! way a broker can fail it.

use std::time::{Duration, Instant};

use harness_bus::{Broker, BrokerConfig, BrokerError, Capability, UnixBroker};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::Verb;
use serde_json::json;

fn client(broker: &ScriptedBroker, timeout: Duration) -> UnixBroker {
    UnixBroker::new(BrokerConfig { socket: broker.socket().to_owned(), timeout })
}

fn cap() -> Capability {
    Capability::new("cap-test-1").unwrap()
}

#[test]
fn a_result_comes_back_and_the_request_carries_id_cap_verb_and_args() {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("role.claim", BrokerAnswer::result(json!({"run": "r-1"})));
    let client = client(&broker, Duration::from_secs(5));
    let result = client.call(&cap(), Verb::RoleClaim, &json!({"instance": "i"})).unwrap();
    assert_eq!(result, json!({"run": "r-1"}));
    let second = client.call(&cap(), Verb::RoleClaim, &json!({})).unwrap();
    assert_eq!(second, json!({"run": "r-1"}));
    let calls = broker.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].verb.as_str(), calls[0].cap.as_str()), ("role.claim", "cap-test-1"));
    assert_eq!(calls[0].args, json!({"instance": "i"}));
    assert_ne!(calls[0].id, calls[1].id, "every request gets its own id");
}

#[test]
fn a_refusal_keeps_the_brokers_code() {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer_once("role.claim", BrokerAnswer::refuse("claim-refused"));
    let error = client(&broker, Duration::from_secs(5))
        .call(&cap(), Verb::RoleClaim, &json!({}))
        .unwrap_err();
    assert!(error.is_refusal());
    assert_eq!(error.code(), "claim-refused");
    assert_eq!(error.to_string(), "refused: claim-refused");
    let BrokerError::Refused { message, .. } = error else { unreachable!() };
    assert_eq!(message, "scripted refusal: claim-refused");
}

#[test]
fn failures_have_codes_of_their_own() {
    let broker = ScriptedBroker::start().unwrap();
    let cases: &[(BrokerAnswer, &str, &str)] = &[
        (BrokerAnswer::Raw("not json".into()), "broker-protocol", "not a reply object"),
        (BrokerAnswer::Raw(r#"{"id": 999, "ok": true}"#.into()), "broker-protocol", "instead of"),
        (
            BrokerAnswer::Raw(r#"{"id": 1, "ok": false, "code": "Bad Code!"}"#.into()),
            "broker-protocol",
            "is not a code",
        ),
        (BrokerAnswer::Silence(Duration::ZERO), "broker-protocol", "without a reply"),
    ];
    for (answer, code, words) in cases {
        broker.answer_once("state", answer.clone());
        // A fresh client per case, so the id of the first call is 1.
        let error = client(&broker, Duration::from_secs(5))
            .call(&cap(), Verb::State, &json!({}))
            .unwrap_err();
        assert_eq!(error.code(), *code, "{error}");
        assert!(error.to_string().contains(words), "{error}");
    }
}

#[test]
fn a_silent_broker_times_out() {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("message.read", BrokerAnswer::Silence(Duration::from_secs(3)));
    let started = Instant::now();
    let error = client(&broker, Duration::from_millis(200))
        .call(&cap(), Verb::MessageRead, &json!({}))
        .unwrap_err();
    assert_eq!(error.code(), "broker-timeout", "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[test]
fn a_missing_broker_is_unreachable_and_the_error_never_holds_the_capability() {
    let dir = tempfile::tempdir().unwrap();
    let client = UnixBroker::new(BrokerConfig {
        socket: dir.path().join("nobody.sock"),
        timeout: Duration::from_secs(1),
    });
    let error = client.call(&cap(), Verb::RoleRelease, &json!({})).unwrap_err();
    assert_eq!(error.code(), "broker-unreachable");
    assert!(error.to_string().contains("nobody.sock"), "{error}");
    assert!(!format!("{error:?} {error}").contains("cap-test-1"));
    assert!(!format!("{client:?}").contains("cap-test-1"));
}
