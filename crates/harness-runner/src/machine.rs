//! The turn loop as a state machine: [`Machine::step`] takes what just happened (a message read,
//! the state read, a turn's outcome, a send's result, a stop) and returns what to do next. It
//! does no I/O: the shell in `session.rs` makes the broker calls, runs the turns and writes the
//! files, and feeds each outcome back. That keeps the delivery rules of docs/protocol.md
//! ("Marking read, and delivery") in one place a property test can drive
//! (`tests::delivery_model`).
//!
//! The rules: a message is marked read with the `after` of the next `message.read`, only once
//! its RESULT was taken (or its turn sends none); a message answered before (its id and digest
//! in the handled list, which the runner state keeps across a restart) is marked again and never
//! answered twice; a RESULT never answers a RESULT; a failed broker call is tried again after a
//! pause, and `brokerRetries` failures in a row end the run; a stop ends it at once, keeping a
//! RESULT the broker did not take.

use std::collections::VecDeque;

use harness_bus::{
    Body, BrokerError, Incoming, Message, MessageKind, RefusalCode, StateError, StateResult,
};

use crate::request;

/// The sender of a landing's outcome: once its RESULT arrives, land_work may start another.
pub const LANDING_SENDER: &str = "landing";

/// How many handled message ids the runner state keeps.
pub(crate) const HANDLED_KEPT: usize = 256;

/// Refusal codes that mean the capability or the claim stopped working (exit 22).
pub(crate) const SESSION_INVALID: &[&str] = &[
    "capability-invalid",
    "capability-expired",
    "claim-revoked",
    "run-ended",
    "session-invalid",
    "not-claimed",
];

/// Returns true if and only if `code` says the capability or the claim stopped working.
pub(crate) fn is_session_invalid(code: &RefusalCode) -> bool {
    SESSION_INVALID.contains(&code.as_str())
}

/// One handled message: its id and the digest of what it said (`harness_bus::Incoming`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Handled {
    pub(crate) id: String,
    pub(crate) digest: String,
}

/// A reply that must reach its sender before the message is marked read. `R` is the RESULT as
/// the shell composed it (the answer with its unslop note).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending<R> {
    pub(crate) id: String,
    pub(crate) digest: String,
    pub(crate) from: String,
    pub(crate) reply: R,
    /// The turn it answers, for `turns/NNNN.unsent`; none for a malformed message.
    pub(crate) turn: Option<u32>,
}

/// What just happened.
#[derive(Debug)]
pub(crate) enum Event<R> {
    /// The loop may go on: it starts, or a pause ended.
    Ready,
    /// `message.read` answered (or failed).
    Read(Result<Option<Incoming>, BrokerError>),
    /// `state` answered, read at `read_at`.
    State { read_at: String, result: Result<StateResult, StateError> },
    /// The turn ran; its number and outcome.
    TurnEnded { number: u32, outcome: crate::turn::TurnOutcome },
    /// The shell composed the RESULT text of [`Op::Compose`].
    Composed(R),
    /// `message.send` answered (or failed).
    Sent(Result<(), BrokerError>),
    /// A stop signal came, before or during the last [`Op`].
    Stop,
}

/// The one thing to do next; its outcome is the next [`Event`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Op<R> {
    /// `message.read`, marking `after` read: [`Event::Read`].
    Read { after: Option<String> },
    /// Wait the poll interval: [`Event::Ready`].
    Pause,
    /// Recheck the seal and read the state: [`Event::State`].
    ReadState,
    /// Run the turn of `message` with this request text, or fail it without running the adapter
    /// for this reason: [`Event::TurnEnded`].
    Turn { message: Message, request: Result<String, String> },
    /// Compose the RESULT for this answer text (the unslop note goes on it): [`Event::Composed`].
    Compose { text: String },
    /// `message.send` of this RESULT: [`Event::Sent`].
    Send { to: String, reply_to: String, reply: R },
    /// The loop is over: mark `mark` read once, save the state, and end with `exit`.
    End { mark: Option<String>, exit: Result<(), Exit> },
}

/// Why the loop ended with an error.
#[derive(Debug)]
pub(crate) enum Exit {
    /// `brokerRetries` broker calls in a row got no answer (exit 23).
    BrokerUnreachable { operation: &'static str, tries: u32, error: BrokerError },
    /// The capability or the claim stopped working (exit 22).
    SessionInvalid { operation: &'static str, code: RefusalCode },
}

/// Two ends are the same if they name the same exit, operation and cause (a broker error is
/// compared by what it says).
impl PartialEq for Exit {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::BrokerUnreachable { operation, tries, error },
                Self::BrokerUnreachable { operation: o, tries: t, error: e },
            ) => operation == o && tries == t && error.to_string() == e.to_string(),
            (
                Self::SessionInvalid { operation, code },
                Self::SessionInvalid { operation: o, code: c },
            ) => operation == o && code == c,
            _ => false,
        }
    }
}

impl Eq for Exit {}

impl From<Exit> for crate::error::RunError {
    fn from(exit: Exit) -> Self {
        match exit {
            Exit::BrokerUnreachable { operation, tries, error } => {
                Self::BrokerUnreachable { operation, tries, source: error }
            }
            Exit::SessionInvalid { operation, code } => Self::SessionInvalid { operation, code },
        }
    }
}

/// What the shell must do besides the next [`Op`], in this order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Effect<R> {
    /// This RESULT reached the broker: its unslop note is spent.
    NoteSent(R),
    /// The handled list changed: save the runner state.
    SaveState,
    /// A RESULT the broker did not take: keep it in `turns/NNNN.unsent` and say why.
    KeepUnsent { pending: Pending<R>, why: String },
    /// A landing's outcome arrived: land_work may start another.
    LandingDone,
}

/// The result of one step.
#[derive(Debug)]
pub(crate) struct Step<R> {
    pub(crate) effects: Vec<Effect<R>>,
    pub(crate) op: Op<R>,
}

/// Where the loop is.
#[derive(Debug)]
enum Phase {
    /// Waiting for a read, a pause, or the start.
    Polling,
    /// The state is being read for this message.
    State(Current),
    /// This message's turn is running.
    Turn(Current),
    /// The RESULT of this message is being composed.
    Composing(Current),
    /// A RESULT is being sent (`pending`).
    Sending,
    /// Ended; every further event is answered with the same end.
    Ended,
}

/// The message whose turn is under way.
#[derive(Debug, Clone)]
struct Current {
    message: Message,
    digest: String,
    /// Its turn's number, once it ran; none for a malformed message's reply.
    turn: Option<u32>,
}

/// The turn loop's state.
#[derive(Debug)]
pub(crate) struct Machine<R> {
    /// `brokerRetries`: this many failed calls in a row end the run.
    retries: u32,
    /// run.json's `stateCap`, for the state block.
    state_cap: u32,
    failures: u32,
    /// The message to mark read with the next `message.read`.
    after: Option<String>,
    pending: Option<Pending<R>>,
    handled: VecDeque<Handled>,
    phase: Phase,
}

impl<R: Clone> Machine<R> {
    /// A machine that starts with the handled list a runner state kept.
    pub(crate) fn new(retries: u32, state_cap: u32, handled: VecDeque<Handled>) -> Self {
        Self {
            retries: retries.max(1),
            state_cap,
            failures: 0,
            after: None,
            pending: None,
            handled,
            phase: Phase::Polling,
        }
    }

    /// The handled list, newest last, for the runner state.
    pub(crate) fn handled(&self) -> &VecDeque<Handled> {
        &self.handled
    }

    /// Takes one event and returns what to do next.
    pub(crate) fn step(&mut self, event: Event<R>) -> Step<R> {
        let mut effects = Vec::new();
        let op = self.advance(event, &mut effects);
        if matches!(op, Op::End { .. }) {
            self.phase = Phase::Ended;
        }
        Step { effects, op }
    }

    fn advance(&mut self, event: Event<R>, effects: &mut Vec<Effect<R>>) -> Op<R> {
        if matches!(self.phase, Phase::Ended) {
            return Op::End { mark: None, exit: Ok(()) };
        }
        match event {
            Event::Stop => self.stop(effects),
            Event::Ready => self.next(),
            Event::Read(result) => self.read(result, effects),
            Event::State { read_at, result } => self.state(&read_at, result),
            Event::TurnEnded { number, outcome } => self.turn_ended(number, outcome, effects),
            Event::Composed(reply) => self.composed(reply),
            Event::Sent(result) => self.sent(result, effects),
        }
    }

    /// The next call when nothing else is under way: the RESULT still owed, else the next read.
    fn next(&mut self) -> Op<R> {
        self.phase = Phase::Polling;
        match &self.pending {
            Some(pending) => {
                self.phase = Phase::Sending;
                Op::Send {
                    to: pending.from.clone(),
                    reply_to: pending.id.clone(),
                    reply: pending.reply.clone(),
                }
            }
            None => Op::Read { after: self.after.clone() },
        }
    }

    fn stop(&mut self, effects: &mut Vec<Effect<R>>) -> Op<R> {
        tracing::info!("stop signal received; stopping");
        if let Some(pending) = self.pending.take() {
            // Not taken, or taken without an answer: the message stays unread (the next runner
            // answers it again) and this RESULT is kept, not dropped.
            let why = match self.phase {
                Phase::Sending => "the runner was stopped while the broker had it",
                _ => "the runner was stopped before the broker took it",
            };
            effects.push(Effect::KeepUnsent { pending, why: why.to_owned() });
        }
        Op::End { mark: self.after.take(), exit: Ok(()) }
    }

    /// One broker call failed without an answer; past `brokerRetries` in a row the run ends.
    fn failed(&mut self, operation: &'static str, error: BrokerError) -> Option<Exit> {
        self.failures += 1;
        tracing::warn!(
            operation,
            failures = self.failures,
            broker_retries = self.retries,
            "the broker did not answer ({}/{}): {error}",
            self.failures,
            self.retries
        );
        (self.failures >= self.retries).then_some(Exit::BrokerUnreachable {
            operation,
            tries: self.failures,
            error,
        })
    }

    /// A failed call: a pause before the next try, or the end.
    fn retry_or_end(
        &mut self,
        operation: &'static str,
        error: BrokerError,
        effects: &mut Vec<Effect<R>>,
    ) -> Op<R> {
        self.phase = Phase::Polling;
        match self.failed(operation, error) {
            None => Op::Pause,
            Some(exit) => {
                if let Some(pending) = self.pending.take() {
                    let why = "the broker stayed unreachable".to_owned();
                    effects.push(Effect::KeepUnsent { pending, why });
                }
                Op::End { mark: self.after.take(), exit: Err(exit) }
            }
        }
    }

    fn read(
        &mut self,
        result: Result<Option<Incoming>, BrokerError>,
        effects: &mut Vec<Effect<R>>,
    ) -> Op<R> {
        let incoming = match result {
            Ok(incoming) => incoming,
            Err(BrokerError::Refused { code, .. }) => {
                tracing::warn!(code = %code, "message.read refused ({code})");
                let exit = Exit::SessionInvalid { operation: "message.read", code };
                return Op::End { mark: None, exit: Err(exit) };
            }
            Err(error) => return self.retry_or_end("message.read", error, effects),
        };
        // The mark went through.
        let marked = self.after.take();
        let Some(incoming) = incoming else {
            self.failures = 0;
            return Op::Pause;
        };
        let id = incoming.id().map(str::to_owned);
        // A message handed over again by the read that marked it was not marked: a broker that
        // keeps doing that is not answering, so such a read counts as a failure.
        let handed_again = id.is_some() && id == marked;
        if id.is_some() && !handed_again {
            self.failures = 0;
        }
        if let Some(id) = &id
            && self.is_handled(id, &incoming.digest)
        {
            self.after = Some(id.clone());
            if handed_again {
                let error = BrokerError::Protocol {
                    verb: harness_tools::Verb::MessageRead,
                    detail: format!("message {id} was handed over again after it was marked read"),
                };
                return self.retry_or_end("message.read", error, effects);
            }
            // Answered before (by this runner or one before it on this run directory) and not
            // marked read, the mark lost with the broker or a stop: mark it now, no turn.
            tracing::info!(message_id = %id, "message {id} was answered already; it is marked read again");
            return self.next();
        }
        match incoming.body {
            Body::Message(message) => {
                tracing::info!(
                    message_id = %message.id,
                    sender = %message.from,
                    kind = ?message.kind,
                    "message received; its turn starts"
                );
                let current = Current { message, digest: incoming.digest, turn: None };
                self.phase = Phase::State(current);
                Op::ReadState
            }
            Body::Malformed { id, from, raw_id, reason } => {
                self.malformed(id, from, raw_id, &reason, incoming.digest, effects)
            }
        }
    }

    /// A message that does not parse: answered `The turn failed: malformed message: …` when
    /// its id and sender can be read, else skipped (marked read when it has an id).
    fn malformed(
        &mut self,
        id: Option<String>,
        from: Option<String>,
        raw_id: Option<String>,
        reason: &str,
        digest: String,
        effects: &mut Vec<Effect<R>>,
    ) -> Op<R> {
        let shown = match (&id, &raw_id) {
            (Some(id), _) => clip(id),
            (None, Some(raw)) => format!("with the id {} (not a non-empty string)", clip(raw)),
            (None, None) => "without an id".to_owned(),
        };
        let reason = clip(reason);
        let outcome = match (&id, &from) {
            (Some(_), Some(_)) => "answered with the reason",
            (Some(_), None) => "skipped, marked read: it has no sender (`from`) to answer",
            (None, _) => {
                "skipped: without an id it cannot be marked read, so it counts as a broker failure"
            }
        };
        tracing::warn!(
            message_id = id.as_deref(),
            "malformed message {shown}: {reason}; {outcome}"
        );
        match (id, from) {
            (Some(id), Some(from)) => {
                // The reply is composed like a turn's, without a turn.
                let message = Message {
                    id,
                    from,
                    kind: MessageKind::Message,
                    sent_at: String::new(),
                    text: String::new(),
                };
                self.phase = Phase::Composing(Current { message, digest, turn: None });
                Op::Compose { text: format!("The turn failed: malformed message: {reason}") }
            }
            (Some(id), None) => {
                self.record(&id, &digest, effects);
                self.after = Some(id);
                self.next()
            }
            (None, _) => {
                let error = BrokerError::Protocol {
                    verb: harness_tools::Verb::MessageRead,
                    detail: "a message without an id".to_owned(),
                };
                self.retry_or_end("message.read", error, effects)
            }
        }
    }

    fn state(&mut self, read_at: &str, result: Result<StateResult, StateError>) -> Op<R> {
        let Phase::State(current) = std::mem::replace(&mut self.phase, Phase::Polling) else {
            return self.out_of_order("state");
        };
        let failure = |code: &str| Err(format!("could not read the current state: {code}"));
        let request = match result {
            Ok(state) => {
                let block = request::state_block(&state, read_at, self.state_cap);
                let message = &current.message;
                Ok(format!("{block}\n{}{}\n", request::header(message), message.text))
            }
            Err(StateError::Broker(BrokerError::Refused { code, .. }))
                if is_session_invalid(&code) =>
            {
                let exit = Exit::SessionInvalid { operation: "state", code };
                return Op::End { mark: None, exit: Err(exit) };
            }
            Err(StateError::Broker(BrokerError::Refused { code, .. })) => failure(code.as_str()),
            Err(StateError::Broker(_)) => failure("broker-unreachable"),
            Err(StateError::Malformed(_)) => failure("malformed-state"),
        };
        let message = current.message.clone();
        self.phase = Phase::Turn(current);
        Op::Turn { message, request }
    }

    fn turn_ended(
        &mut self,
        number: u32,
        outcome: crate::turn::TurnOutcome,
        effects: &mut Vec<Effect<R>>,
    ) -> Op<R> {
        use crate::turn::TurnOutcome;
        let Phase::Turn(mut current) = std::mem::replace(&mut self.phase, Phase::Polling) else {
            return self.out_of_order("a turn's end");
        };
        let text = match outcome {
            TurnOutcome::Stopped => return self.stop(effects),
            TurnOutcome::Answer(answer) => answer,
            TurnOutcome::Failed(reason) => format!("The turn failed: {reason}"),
        };
        let message = &current.message;
        if message.kind == MessageKind::Result {
            if message.from == LANDING_SENDER {
                effects.push(Effect::LandingDone);
            }
            // An incoming RESULT never gets an automatic reply; its note waits for one.
            let id = message.id.clone();
            self.record(&id, &current.digest, effects);
            self.after = Some(id);
            return self.next();
        }
        current.turn = Some(number);
        self.phase = Phase::Composing(current);
        Op::Compose { text }
    }

    fn composed(&mut self, reply: R) -> Op<R> {
        let Phase::Composing(current) = std::mem::replace(&mut self.phase, Phase::Polling) else {
            return self.out_of_order("a composed RESULT");
        };
        self.pending = Some(Pending {
            id: current.message.id,
            digest: current.digest,
            from: current.message.from,
            reply,
            turn: current.turn,
        });
        self.next()
    }

    fn sent(&mut self, result: Result<(), BrokerError>, effects: &mut Vec<Effect<R>>) -> Op<R> {
        if !matches!(self.phase, Phase::Sending) {
            return self.out_of_order("a send's result");
        }
        self.phase = Phase::Polling;
        let Some(pending) = self.pending.take() else {
            return self.out_of_order("a send's result");
        };
        match result {
            Ok(()) => {
                tracing::info!(
                    message_id = %pending.id,
                    to = %pending.from,
                    turn = pending.turn,
                    "RESULT sent"
                );
                effects.push(Effect::NoteSent(pending.reply));
                // Delivered: recorded before anything else, so no runner answers it again.
                self.record(&pending.id, &pending.digest, effects);
                self.after = Some(pending.id);
                self.failures = 0;
                self.next()
            }
            Err(BrokerError::Refused { code, .. }) if is_session_invalid(&code) => {
                let why = format!("message.send refused ({code})");
                effects.push(Effect::KeepUnsent { pending, why });
                let exit = Exit::SessionInvalid { operation: "message.send", code };
                Op::End { mark: self.after.take(), exit: Err(exit) }
            }
            Err(BrokerError::Refused { code, .. }) => {
                // It cannot be delivered: keep it for the operator, keep its note for the next
                // reply, and go on.
                let (id, digest) = (pending.id.clone(), pending.digest.clone());
                effects.push(Effect::KeepUnsent {
                    pending,
                    why: format!("message.send refused ({code})"),
                });
                self.record(&id, &digest, effects);
                self.after = Some(id);
                self.next()
            }
            Err(error) => {
                self.pending = Some(pending);
                self.retry_or_end("message.send", error, effects)
            }
        }
    }

    /// An event that does not belong to the phase: a bug of the shell. The loop ends as a stop
    /// does, keeping what it owes, rather than guess.
    fn out_of_order(&mut self, what: &str) -> Op<R> {
        tracing::error!("the turn loop got {what} it did not ask for; it stops");
        Op::End { mark: self.after.take(), exit: Ok(()) }
    }

    /// Returns true if and only if this message (its id and its digest) is answered already.
    fn is_handled(&self, id: &str, digest: &str) -> bool {
        self.handled.iter().any(|known| known.id == id && known.digest == digest)
    }

    /// Records that message `id` is answered or otherwise done with.
    fn record(&mut self, id: &str, digest: &str, effects: &mut Vec<Effect<R>>) {
        if !self.is_handled(id, digest) {
            self.handled.push_back(Handled { id: id.to_owned(), digest: digest.to_owned() });
        }
        while self.handled.len() > HANDLED_KEPT {
            self.handled.pop_front();
        }
        effects.push(Effect::SaveState);
    }
}

/// The most of a broker's text a log line or a malformed message's RESULT repeats.
const CLIP_CHARS: usize = 200;

/// `text` up to [`CLIP_CHARS`] characters, `…` marking a cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(CLIP_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
