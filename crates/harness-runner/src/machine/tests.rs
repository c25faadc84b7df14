//! The machine against a model of the broker: proptest drives it with random broker behaviour
//! (failures, answers lost after the broker acted, duplicates, reordering, refusals, stops,
//! restarts with the runner state kept and with it lost) and checks what docs/protocol.md
//! promises: every message is answered exactly once while the state survives and at least once
//! across a lost state, no RESULT answers a RESULT, and a stop always ends the loop at once.

#![allow(clippy::unwrap_used, reason = "a test fails loudly")]

use std::collections::{HashMap, HashSet, VecDeque};

use harness_bus::{BrokerError, Incoming, RefusalCode, StateError, StateResult};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::turn::TurnOutcome;

/// What each generated message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A message that gets a RESULT.
    Message,
    /// An incoming RESULT: a turn, never a reply.
    Result,
    /// A landing's outcome.
    Landing,
    /// Malformed (no text) but with an id and a sender: answered with the reason.
    MalformedAnswerable,
    /// Malformed without a sender: marked read, never answered.
    MalformedNoSender,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Message),
        1 => Just(Kind::Result),
        1 => Just(Kind::Landing),
        1 => Just(Kind::MalformedAnswerable),
        1 => Just(Kind::MalformedNoSender),
    ]
}

impl Kind {
    fn json(self, id: &str) -> Value {
        match self {
            Kind::Message => {
                json!({"id": id, "from": "pm", "kind": "message", "sentAt": "t", "text": id})
            }
            Kind::Result => {
                json!({"id": id, "from": "qa", "kind": "result", "sentAt": "t", "text": id})
            }
            Kind::Landing => {
                json!({"id": id, "from": LANDING_SENDER, "kind": "result", "sentAt": "t", "text": id})
            }
            Kind::MalformedAnswerable => {
                json!({"id": id, "from": "pm", "kind": "message", "sentAt": "t"})
            }
            Kind::MalformedNoSender => {
                json!({"id": id, "kind": "message", "sentAt": "t", "text": id})
            }
        }
    }

    /// Returns true if and only if a message of this kind must get a RESULT.
    fn answered(self) -> bool {
        matches!(self, Kind::Message | Kind::MalformedAnswerable)
    }
}

/// The broker and everything the runner did to it.
#[derive(Debug, Default)]
struct World {
    messages: Vec<(String, Kind, Value)>,
    read: HashSet<String>,
    /// Every RESULT the broker took, by the message it answers.
    delivered: HashMap<String, Vec<String>>,
    /// Sends the broker took whose answer the runner never saw.
    lost_acks: HashMap<String, usize>,
    /// Messages whose RESULT the broker refused for good.
    refused: HashSet<String>,
    /// Random choices; when they run out, the broker behaves and no stop comes.
    choices: VecDeque<u8>,
    state_lost: bool,
    turns: usize,
}

impl World {
    /// A fault number in `0..n` (0 is "none"), mostly 0.
    fn fault(&mut self, n: u8) -> u8 {
        match self.choices.pop_front() {
            Some(choice) if choice % 3 == 0 => 1 + (choice / 3) % (n - 1),
            _ => 0,
        }
    }

    fn coin(&mut self) -> bool {
        self.choices.pop_front().is_some_and(|choice| choice % 2 == 1)
    }

    fn mark(&mut self, after: Option<&str>) {
        if let Some(id) = after {
            self.read.insert(id.to_owned());
        }
    }

    fn unread(&self) -> Vec<usize> {
        (0..self.messages.len()).filter(|&i| !self.read.contains(&self.messages[i].0)).collect()
    }

    /// The broker's answer to `message.read` with `after`.
    fn read(&mut self, after: Option<&str>) -> Result<Option<Incoming>, BrokerError> {
        match self.fault(5) {
            1 => return Err(unreachable()),
            2 => {
                self.mark(after);
                return Err(timeout());
            }
            3 if !self.read.is_empty() => {
                // A duplicate: a message read already, handed over again.
                self.mark(after);
                let read: Vec<usize> = (0..self.messages.len())
                    .filter(|&i| self.read.contains(&self.messages[i].0))
                    .collect();
                let pick = read[usize::from(self.choices.pop_front().unwrap_or(0)) % read.len()];
                return Ok(Some(Incoming::from_value(self.messages[pick].2.clone())));
            }
            4 => {
                // Reordered: any unread message, not the oldest.
                self.mark(after);
                let unread = self.unread();
                if unread.is_empty() {
                    return Ok(None);
                }
                let pick =
                    unread[usize::from(self.choices.pop_front().unwrap_or(0)) % unread.len()];
                return Ok(Some(Incoming::from_value(self.messages[pick].2.clone())));
            }
            _ => {}
        }
        self.mark(after);
        Ok(self.unread().first().map(|&i| Incoming::from_value(self.messages[i].2.clone())))
    }

    fn state(&mut self) -> Result<StateResult, StateError> {
        match self.fault(4) {
            1 => Err(StateError::Broker(unreachable())),
            2 => Err(StateError::Malformed("launch: missing".to_owned())),
            3 => Err(StateError::Broker(refused("not-found"))),
            _ => Ok(serde_json::from_value(json!({
                "launch": {"state": "running", "at": "t", "event": "e"},
                "tasks": {"open": [], "total": 0}
            }))
            .unwrap()),
        }
    }

    fn send(&mut self, reply_to: &str, text: &str) -> Result<(), BrokerError> {
        match self.fault(5) {
            1 => Err(unreachable()),
            2 => {
                self.deliver(reply_to, text);
                *self.lost_acks.entry(reply_to.to_owned()).or_default() += 1;
                Err(timeout())
            }
            3 => {
                self.refused.insert(reply_to.to_owned());
                Err(refused("recipient-gone"))
            }
            4 => Err(refused("claim-revoked")),
            _ => {
                self.deliver(reply_to, text);
                Ok(())
            }
        }
    }

    fn deliver(&mut self, reply_to: &str, text: &str) {
        self.delivered.entry(reply_to.to_owned()).or_default().push(text.to_owned());
    }
}

fn unreachable() -> BrokerError {
    let source = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    BrokerError::Unreachable { socket: "broker.sock".into(), source }
}

fn timeout() -> BrokerError {
    BrokerError::Timeout {
        verb: harness_tools::Verb::MessageRead,
        after: std::time::Duration::ZERO,
    }
}

fn refused(code: &str) -> BrokerError {
    BrokerError::Refused { code: RefusalCode::new(code).unwrap(), message: String::new() }
}

/// Runs runners on `world` until every message is read and nothing is owed, restarting after
/// each end; returns the number of restarts.
fn simulate(world: &mut World, retries: u32) -> Result<usize, TestCaseError> {
    let mut restarts = 0;
    let mut handled = VecDeque::new();
    'runner: loop {
        let mut machine: Machine<String> = Machine::new(retries, 5, handled.clone());
        let mut event = Event::Ready;
        for _ in 0..10_000 {
            let step = machine.step(event);
            let stop_now = world.fault(12) == 1;
            event = match step.op {
                Op::End { mark, exit: _ } => {
                    if !world.coin() {
                        world.mark(mark.as_deref());
                    }
                    handled = if world.coin() {
                        world.state_lost = true;
                        VecDeque::new()
                    } else {
                        machine.handled().clone()
                    };
                    restarts += 1;
                    prop_assert!(restarts < 2_000, "the runner keeps ending");
                    continue 'runner;
                }
                Op::Pause if world.unread().is_empty() && world.choices.is_empty() => {
                    return Ok(restarts);
                }
                _ if stop_now => {
                    if let Op::Send { reply_to, reply, .. } = &step.op
                        && world.coin()
                    {
                        // The broker took it just as the stop came.
                        world.deliver(reply_to, reply);
                        *world.lost_acks.entry(reply_to.clone()).or_default() += 1;
                    }
                    let stopped = machine.step(Event::Stop);
                    prop_assert!(
                        matches!(stopped.op, Op::End { .. }),
                        "a stop did not end the loop: {:?}",
                        stopped.op
                    );
                    Event::Stop
                }
                Op::Read { after } => Event::Read(world.read(after.as_deref())),
                Op::Pause => Event::Ready,
                Op::ReadState => Event::State { read_at: "t".to_owned(), result: world.state() },
                Op::Turn { message, request } => {
                    world.turns += 1;
                    prop_assert!(
                        request.is_err() || request.as_ref().unwrap().contains(&message.text)
                    );
                    let outcome = match world.fault(3) {
                        1 => TurnOutcome::Failed("the adapter exited with status 1".to_owned()),
                        2 => TurnOutcome::Stopped,
                        _ => {
                            TurnOutcome::Answer(format!("answer {} to {}", world.turns, message.id))
                        }
                    };
                    Event::TurnEnded { number: u32::try_from(world.turns).unwrap(), outcome }
                }
                Op::Compose { text } => Event::Composed(format!("{text} [note]")),
                Op::Send { to: _, reply_to, reply } => Event::Sent(world.send(&reply_to, &reply)),
            };
            if matches!(event, Event::Stop) {
                // The stop ended this runner above; the next one starts.
                handled = if world.coin() {
                    world.state_lost = true;
                    VecDeque::new()
                } else {
                    machine.handled().clone()
                };
                restarts += 1;
                continue 'runner;
            }
        }
        prop_assert!(false, "the runner did not settle in 10,000 steps");
    }
}

fn world(kinds: &[Kind], choices: Vec<u8>) -> World {
    let messages = kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let id = format!("m{i}");
            let value = kind.json(&id);
            (id, *kind, value)
        })
        .collect();
    World { messages, choices: choices.into(), ..World::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn delivery_model(
        kinds in prop::collection::vec(kind(), 1..7),
        choices in prop::collection::vec(any::<u8>(), 0..120),
        retries in 1u32..6,
    ) {
        let mut world = world(&kinds, choices);
        simulate(&mut world, retries)?;
        for (id, kind, _) in &world.messages {
            prop_assert!(world.read.contains(id), "{id} ({kind:?}) was never marked read");
            let delivered = world.delivered.get(id).map_or(0, Vec::len);
            let lost = world.lost_acks.get(id).copied().unwrap_or(0);
            if !kind.answered() {
                // No RESULT answers a RESULT, and a message without a sender gets none.
                prop_assert_eq!(delivered, 0, "{} ({:?}) got a RESULT", id, kind);
                continue;
            }
            // Deliveries past the first are only sends the broker took without the runner
            // seeing the answer (protocol.md: a broker deduplicates on replyTo).
            let answers = delivered - lost.min(delivered);
            let refused = world.refused.contains(id);
            if world.state_lost {
                // Across a lost state: at least once (a RESULT the broker refused for good is
                // kept in turns/, not delivered).
                prop_assert!(refused || delivered >= 1, "{id} was never answered");
            } else if refused {
                prop_assert!(answers <= 1, "{id} answered {answers} times");
            } else {
                prop_assert_eq!(answers, 1, "{} answered {} times ({} delivered, {} lost)", id, answers, delivered, lost);
            }
        }
    }
}

/// The model itself: with no faults, each message is answered once, in order.
#[test]
fn a_calm_broker_gets_one_result_per_message() {
    let kinds = [Kind::Message, Kind::Result, Kind::MalformedAnswerable, Kind::MalformedNoSender];
    let mut world = world(&kinds, Vec::new());
    assert_eq!(simulate(&mut world, 3).unwrap(), 0);
    assert_eq!(world.delivered.len(), 2, "{:?}", world.delivered);
    assert_eq!(world.delivered["m0"], ["answer 1 to m0 [note]"]);
    assert!(world.delivered["m2"][0].starts_with("The turn failed: malformed message: "));
    assert_eq!(world.turns, 2, "the malformed ones run no turn");
}

/// A stop in every phase ends the loop at once and keeps a RESULT it owes.
#[test]
fn a_stop_ends_every_phase_at_once() {
    let message = Kind::Message.json("m0");
    let mut machine: Machine<String> = Machine::new(3, 5, VecDeque::new());
    assert_eq!(machine.step(Event::Ready).op, Op::Read { after: None });
    let read = machine.step(Event::Read(Ok(Some(Incoming::from_value(message)))));
    assert_eq!(read.op, Op::ReadState);
    let state = serde_json::from_value(json!({
        "launch": {"state": "running", "at": "t", "event": "e"}, "tasks": {"open": [], "total": 0}
    }))
    .unwrap();
    let turn = machine.step(Event::State { read_at: "t".into(), result: Ok(state) });
    assert!(matches!(turn.op, Op::Turn { .. }));
    let outcome = TurnOutcome::Answer("hi".into());
    let compose = machine.step(Event::TurnEnded { number: 1, outcome });
    assert_eq!(compose.op, Op::Compose { text: "hi".into() });
    let send = machine.step(Event::Composed("hi".into()));
    assert!(matches!(send.op, Op::Send { .. }));
    let stop = machine.step(Event::Stop);
    assert_eq!(stop.op, Op::End { mark: None, exit: Ok(()) });
    assert!(
        matches!(&stop.effects[..], [Effect::KeepUnsent { pending, why }]
            if pending.reply == "hi" && why.contains("while the broker had it")),
        "{:?}",
        stop.effects
    );
}

/// `brokerRetries` failed reads in a row end the run with exit 23's reason; a good read between
/// them starts the count again.
#[test]
fn broker_retries_count_failures_in_a_row() {
    let mut machine: Machine<String> = Machine::new(3, 5, VecDeque::new());
    machine.step(Event::Ready);
    assert_eq!(machine.step(Event::Read(Err(unreachable()))).op, Op::Pause);
    assert_eq!(machine.step(Event::Ready).op, Op::Read { after: None });
    assert_eq!(machine.step(Event::Read(Err(unreachable()))).op, Op::Pause);
    machine.step(Event::Ready);
    assert_eq!(machine.step(Event::Read(Ok(None))).op, Op::Pause);
    for _ in 0..2 {
        machine.step(Event::Ready);
        assert_eq!(machine.step(Event::Read(Err(unreachable()))).op, Op::Pause);
    }
    machine.step(Event::Ready);
    let end = machine.step(Event::Read(Err(unreachable()))).op;
    assert!(
        matches!(end, Op::End { exit: Err(Exit::BrokerUnreachable { tries: 3, .. }), .. }),
        "{end:?}"
    );
}
