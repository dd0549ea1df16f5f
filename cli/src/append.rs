//! `shale append`: stdin, one record per line, in batches through an append session, as
//! an idempotent producer. Every batch carries the run's producer id and its sequence
//! number, so when the session breaks (a killed gateway, a metadata failover, an
//! outcome left unknown) the batches not yet acked are sent again on a new session and
//! the server applies each exactly once, answering a repeat with its original ack.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::time::Duration;

use tokio::time::Instant;

use clap::Args;
use shale_proto::grpc as pb;
use shale_proto::grpc::records_client::RecordsClient;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::client::{channel, split_target, Connection, Failure};
use crate::format::{BadLine, Format};

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// BASIN/STREAM
    pub target: String,
    /// How stdin is read, one record per line.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Fail unless the stream's tail equals this when the first batch lands.
    #[arg(long)]
    pub match_seq_num: Option<u64>,
    /// Fail unless the stream's fencing token equals this (every batch).
    #[arg(long)]
    pub fencing_token: Option<String>,
    /// The idempotent producer id the batches carry [default: a new id per run].
    #[arg(long)]
    pub producer_id: Option<String>,
    /// The first batch's producer sequence number; set it to go on with an earlier
    /// run's producer id.
    #[arg(long, default_value_t = 0)]
    pub producer_seq: u64,
    /// How long to keep retrying while the server is unreachable or an append's outcome
    /// is unknown.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub retry_for: Duration,
    #[command(flatten)]
    pub connection: Connection,
}

const BATCH_RECORDS: usize = 1000;
const BATCH_BYTES: usize = 1000 * 1000;
/// How long a partial batch waits for more input before it is sent.
const BATCH_LINGER: Duration = Duration::from_millis(5);
/// Batches in flight at most: the server keeps a producer's last 8 acks, so every
/// batch resent after a break gets its original ack.
const IN_FLIGHT: usize = 8;
/// Pause between attempts to open a new session.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Reads records from stdin and appends them; see the module doc.
pub async fn append(args: AppendArgs) -> Result<(), Failure> {
    let (basin, stream) = split_target(&args.target)?;
    let producer_id = args
        .producer_id
        .clone()
        .unwrap_or_else(|| format!("cli-{}", shale_storage::ids::unique_id(&shale_storage::SystemClock)));
    let (batches_tx, batches) = mpsc::channel(1);
    let reader = tokio::spawn(read_batches(args.format, batches_tx));
    let mut run = Run {
        template: pb::AppendRequest {
            basin,
            stream,
            fencing_token: args.fencing_token.clone(),
            producer_id: Some(producer_id),
            ..Default::default()
        },
        first_seq: args.producer_seq,
        match_seq_num: args.match_seq_num,
        next_seq: args.producer_seq,
        pending: VecDeque::new(),
        batches,
        input: Input::Open,
        progress: Progress::new(),
    };
    let mut failing_since: Option<Instant> = None;
    let outcome = loop {
        match run.session(&args.connection).await {
            Ok(()) => break Ok(()),
            Err(failure) if failure.retryable() => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > args.retry_for {
                    break Err(failure.into_failure());
                }
                tracing::debug!(error = %failure.message(), pending = run.pending.len(), "append session broke; resending");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(failure) => break Err(failure.into_failure()),
        }
        if run.progress.acked_since_last_look() {
            failing_since = None;
        }
    };
    reader.abort();
    run.progress.finish();
    let outcome = outcome.and(match run.input {
        Input::Failed(failure) => Err(failure),
        Input::Open | Input::Done => Ok(()),
    });
    outcome.map_err(|Failure(message, code)| Failure(format!("{message}{}", run.progress.so_far()), code))
}

/// Why a session ended early.
enum SessionFailure {
    Status(tonic::Status),
    Connect(Failure),
}

impl SessionFailure {
    /// Whether sending the pending batches again on a new session may succeed: the
    /// server was unreachable, went away, was overloaded, or left the outcome unknown.
    fn retryable(&self) -> bool {
        use tonic::Code;
        match self {
            SessionFailure::Connect(Failure(_, code)) => *code == 6,
            SessionFailure::Status(status) => matches!(
                status.code(),
                Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded | Code::ResourceExhausted
            ),
        }
    }

    fn message(&self) -> String {
        match self {
            SessionFailure::Status(status) => status.message().to_string(),
            SessionFailure::Connect(Failure(message, _)) => message.clone(),
        }
    }

    fn into_failure(self) -> Failure {
        match self {
            SessionFailure::Status(status) => status.into(),
            SessionFailure::Connect(failure) => failure,
        }
    }
}

enum Input {
    Open,
    Done,
    /// Stopped at a line that is not a record; what came before is still appended.
    Failed(Failure),
}

/// One `shale append` run: the batches sent and not yet acked, and what is left to read.
struct Run {
    template: pb::AppendRequest,
    first_seq: u64,
    match_seq_num: Option<u64>,
    next_seq: u64,
    pending: VecDeque<pb::AppendRequest>,
    batches: mpsc::Receiver<Result<Vec<pb::AppendRecord>, Failure>>,
    input: Input,
    progress: Progress,
}

impl Run {
    fn finished(&self) -> bool {
        self.pending.is_empty() && !matches!(self.input, Input::Open)
    }

    /// One append session: sends the pending batches again, then new ones, until the
    /// input ends and everything is acked, or the session breaks.
    async fn session(&mut self, connection: &Connection) -> Result<(), SessionFailure> {
        let mut client = RecordsClient::new(channel(connection).await.map_err(SessionFailure::Connect)?);
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        for request in &self.pending {
            tx.try_send(request.clone()).map_err(|_| SessionFailure::Status(tonic::Status::internal("resend")))?;
        }
        let mut tx = Some(tx);
        let request = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut acks = client.append_session(request).await.map_err(SessionFailure::Status)?.into_inner();
        loop {
            if self.finished() {
                // Ending the request stream lets the server close the session.
                tx = None;
            }
            let room = tx.is_some() && self.pending.len() < IN_FLIGHT && matches!(self.input, Input::Open);
            tokio::select! {
                batch = self.batches.recv(), if room => {
                    match batch {
                        Some(Ok(records)) => {
                            let request = self.stamp(records);
                            self.pending.push_back(request.clone());
                            if let Some(tx) = &tx {
                                // A closed session shows as an error on `acks`.
                                let _ = tx.send(request).await;
                            }
                        }
                        Some(Err(failure)) => self.input = Input::Failed(failure),
                        None => self.input = Input::Done,
                    }
                }
                ack = acks.next() => match ack {
                    Some(Ok(ack)) => {
                        self.pending.pop_front();
                        self.progress.acked(&ack);
                    }
                    Some(Err(status)) => return Err(SessionFailure::Status(status)),
                    None if self.finished() => return Ok(()),
                    None => return Err(SessionFailure::Status(tonic::Status::unavailable("append session ended early"))),
                },
            }
        }
    }

    /// The request for the next batch: the producer's next sequence number, and the
    /// run's `match_seq_num` on the first batch only.
    fn stamp(&mut self, records: Vec<pb::AppendRecord>) -> pb::AppendRequest {
        let seq = self.next_seq;
        self.next_seq += 1;
        pb::AppendRequest {
            records,
            producer_seq: Some(seq),
            match_seq_num: if seq == self.first_seq { self.match_seq_num } else { None },
            ..self.template.clone()
        }
    }
}

/// Batches of records from stdin, lingering briefly for a partial batch to fill; a line
/// that is not a record ends the input with an error naming the line.
async fn read_batches(format: Format, batches: mpsc::Sender<Result<Vec<pb::AppendRecord>, Failure>>) {
    let mut input = tokio::io::BufReader::with_capacity(256 * 1024, tokio::io::stdin());
    let mut line_number = 0u64;
    let mut line = Vec::new();
    loop {
        let mut records = Vec::new();
        let mut bytes = 0;
        let mut end = None;
        while records.len() < BATCH_RECORDS && bytes < BATCH_BYTES {
            // A read cut short by the linger timeout keeps its partial line in `line`
            // and goes on from there next time.
            let next = if records.is_empty() {
                input.read_until(b'\n', &mut line).await
            } else {
                match tokio::time::timeout(BATCH_LINGER, input.read_until(b'\n', &mut line)).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            };
            line_number += 1;
            match next {
                Ok(0) => {
                    end = Some(Ok(()));
                    break;
                }
                Ok(_) => match format.parse(take_line(&mut line).as_slice()) {
                    Ok(record) => {
                        bytes += record.body.len() + 8;
                        records.push(record);
                    }
                    Err(BadLine(message)) => {
                        end = Some(Err(Failure(format!("line {line_number}: {message}"), 2)));
                        break;
                    }
                },
                Err(e) => {
                    end = Some(Err(Failure(format!("reading stdin at line {line_number}: {e}"), 1)));
                    break;
                }
            }
        }
        if !records.is_empty() && batches.send(Ok(records)).await.is_err() {
            return;
        }
        match end {
            Some(Ok(())) => return,
            Some(Err(failure)) => {
                let _ = batches.send(Err(failure)).await;
                return;
            }
            None => {}
        }
    }
}

/// The line read into `buffer`, without its newline, leaving `buffer` empty.
fn take_line(buffer: &mut Vec<u8>) -> Vec<u8> {
    let mut line = std::mem::take(buffer);
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    line
}

/// What has been acked: reported on stderr as it goes (on a terminal) and at the end.
struct Progress {
    records: u64,
    first_seq: Option<u64>,
    end_seq: u64,
    started: Instant,
    last_report: Instant,
    on_terminal: bool,
    acked_since_look: bool,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            records: 0,
            first_seq: None,
            end_seq: 0,
            started: now,
            last_report: now,
            on_terminal: std::io::stderr().is_terminal(),
            acked_since_look: false,
        }
    }

    fn acked(&mut self, ack: &pb::AppendAck) {
        let (start, end) = (ack.start.unwrap_or_default().seq_num, ack.end.unwrap_or_default().seq_num);
        self.first_seq.get_or_insert(start);
        self.end_seq = end;
        self.records += end - start;
        self.acked_since_look = true;
        if self.on_terminal && self.last_report.elapsed() > Duration::from_secs(1) {
            let secs = self.started.elapsed().as_secs_f64();
            eprint!("\r{} records, {:.0} records/s", self.records, self.records as f64 / secs);
            self.last_report = Instant::now();
        }
    }

    /// Whether anything was acked since the last call.
    fn acked_since_last_look(&mut self) -> bool {
        std::mem::take(&mut self.acked_since_look)
    }

    fn finish(&self) {
        if self.on_terminal {
            eprintln!();
        }
        match self.first_seq {
            Some(first) => eprintln!("appended {}, seq {first}..{}", records(self.records), self.end_seq),
            None => eprintln!("nothing to append: stdin had no records"),
        }
    }

    /// For an error message: what was appended before it.
    fn so_far(&self) -> String {
        match self.first_seq {
            Some(first) => format!(" ({} appended before it, seq {first}..{})", records(self.records), self.end_seq),
            None => " (nothing appended)".to_string(),
        }
    }
}

/// `1 record`, `2 records`.
fn records(count: u64) -> String {
    format!("{count} record{}", if count == 1 { "" } else { "s" })
}
