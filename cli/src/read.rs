//! `shale read` and `shale tail`, as S2's CLI reads: one session whose `--count`,
//! `--bytes` and `--until` bound the whole read (any size: the server pages), following
//! new records while no bound is given; `--no-follow` instead pages to the tail as it
//! is and stops. Output is buffered and flushed once per batch.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use shale_proto::grpc as pb;
use shale_proto::grpc::records_client::RecordsClient;
use shale_proto::grpc::streams_client::StreamsClient;
use tokio_stream::StreamExt;

use crate::client::{channel, split_target, Connection, Failure, Transport};
use crate::format::Format;

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// BASIN/STREAM
    pub target: String,
    /// Start at this sequence number [default: the tail, as in S2].
    #[arg(short = 's', long, visible_alias = "from", group = "start")]
    pub seq_num: Option<u64>,
    /// Start at the first record with this timestamp (milliseconds since the epoch) or later.
    #[arg(long, group = "start")]
    pub timestamp: Option<u64>,
    /// Start at records this old, e.g. 5m or 1h.
    #[arg(long, value_parser = humantime::parse_duration, group = "start")]
    pub ago: Option<Duration>,
    /// Start this many records before the tail.
    #[arg(long, group = "start")]
    pub tail_offset: Option<u64>,
    /// Resume from this tracked consumer's committed position (or the start given, when
    /// it has none) and commit the position after each batch printed.
    #[arg(long)]
    pub consumer: Option<String>,
    /// Stop after this many records (the whole read; waits for them unless --no-follow).
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// Stop after this many metered bytes of records (the whole read).
    #[arg(short = 'b', long)]
    pub bytes: Option<u64>,
    /// Only records with a timestamp below this (milliseconds since the epoch); the read
    /// ends at the first record at or past it.
    #[arg(long)]
    pub until: Option<u64>,
    /// Start at the tail instead of failing when the start lies past it.
    #[arg(long)]
    pub clamp: bool,
    /// Stop at the tail as it is when reached, instead of following new records
    /// [default: follow unless --count, --bytes or --until is given].
    #[arg(long)]
    pub no_follow: bool,
    #[command(flatten)]
    pub printing: Printing,
    #[command(flatten)]
    pub connection: Connection,
}

/// How and where records are printed.
#[derive(Debug, Args)]
pub struct Printing {
    /// How records are printed.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Write records to this file (appending) instead of stdout; `-` is stdout.
    #[arg(short = 'o', long, default_value = "-")]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    /// BASIN/STREAM
    pub target: String,
    /// How many of the last records.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub lines: u64,
    /// Keep printing records as they are appended.
    #[arg(short = 'f', long)]
    pub follow: bool,
    #[command(flatten)]
    pub printing: Printing,
    #[command(flatten)]
    pub connection: Connection,
}

impl From<TailArgs> for ReadArgs {
    /// The last `lines` records: a read from that far before the tail, bounded by the
    /// count unless following.
    fn from(tail: TailArgs) -> Self {
        ReadArgs {
            target: tail.target,
            seq_num: None,
            timestamp: None,
            ago: None,
            tail_offset: Some(tail.lines),
            consumer: None,
            count: None,
            bytes: None,
            until: None,
            clamp: false,
            no_follow: !tail.follow,
            printing: tail.printing,
            connection: tail.connection,
        }
    }
}

/// Records printed per unary page under `--no-follow` (S2's cap per call).
const PAGE_RECORDS: u64 = 1000;

/// Prints records; see the module doc.
pub async fn read(args: ReadArgs) -> Result<(), Failure> {
    let (basin, stream) = split_target(&args.target)?;
    let transport = channel(&args.connection).await?;
    let mut consumer = match &args.consumer {
        Some(name) => Some(Consumer::resume(transport.clone(), &basin, &stream, name).await?),
        None => None,
    };
    let start = match consumer.as_ref().and_then(|c| c.committed) {
        Some(position) => pb::read_request::Start::SeqNum(position),
        None => start(&args),
    };
    let request = pb::ReadRequest {
        basin,
        stream,
        start: Some(start),
        count: args.count,
        bytes: args.bytes,
        until: args.until,
        clamp: args.clamp,
        wait_secs: 0,
    };
    let mut out = Output::open(&args.printing.output)?;
    let mut client = RecordsClient::new(transport);
    let mut batches =
        if args.no_follow { Batches::pages(request) } else { Batches::session(&mut client, request).await? };
    while let Some(records) = batches.next(&mut client).await? {
        for record in &records {
            args.printing.format.write(&mut out.writer, record)?;
        }
        out.writer.flush()?;
        if let (Some(consumer), Some(last)) = (&mut consumer, records.last()) {
            consumer.commit(last.seq_num + 1).await?;
        }
    }
    Ok(())
}

/// Where the read starts when no consumer position says: the flag given, or the tail.
fn start(args: &ReadArgs) -> pb::read_request::Start {
    use pb::read_request::Start;
    if let Some(seq_num) = args.seq_num {
        Start::SeqNum(seq_num)
    } else if let Some(timestamp) = args.timestamp {
        Start::Timestamp(timestamp)
    } else if let Some(ago) = args.ago {
        let now_ms = shale_storage::Clock::now_ms(&shale_storage::SystemClock);
        Start::Timestamp(now_ms.saturating_sub(ago.as_millis() as u64))
    } else {
        Start::TailOffset(args.tail_offset.unwrap_or(0))
    }
}

/// Where records go: stdout or a file, through one buffer.
struct Output {
    writer: std::io::BufWriter<Box<dyn Write>>,
}

impl Output {
    fn open(path: &std::path::Path) -> Result<Self, Failure> {
        let sink: Box<dyn Write> = if path == std::path::Path::new("-") {
            Box::new(std::io::stdout().lock())
        } else {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Failure(format!("opening {}: {e}", path.display()), 1))?;
            Box::new(file)
        };
        Ok(Self { writer: std::io::BufWriter::with_capacity(256 * 1024, sink) })
    }
}

/// The batches of one read: from a session (following, or bounded by the server), or
/// from unary reads paged to the tail.
enum Batches {
    Session(tonic::Streaming<pb::ReadSessionResponse>),
    Pages { request: pb::ReadRequest, done: bool },
}

impl Batches {
    async fn session(client: &mut RecordsClient<Transport>, request: pb::ReadRequest) -> Result<Self, Failure> {
        Ok(Batches::Session(client.read_session(request).await?.into_inner()))
    }

    fn pages(request: pb::ReadRequest) -> Self {
        Batches::Pages { request, done: false }
    }

    /// The next non-empty batch, or `None` when the read is over.
    async fn next(
        &mut self,
        client: &mut RecordsClient<Transport>,
    ) -> Result<Option<Vec<pb::SequencedRecord>>, Failure> {
        match self {
            Batches::Session(session) => {
                loop {
                    match session.next().await.transpose()? {
                        None => return Ok(None),
                        Some(pb::ReadSessionResponse {
                            event: Some(pb::read_session_response::Event::Batch(batch)),
                        }) if !batch.records.is_empty() => return Ok(Some(batch.records)),
                        Some(_) => {}
                    }
                }
            }
            Batches::Pages { done: true, .. } => Ok(None),
            Batches::Pages { request, done } => {
                let page = pb::ReadRequest { count: Some(request.count.unwrap_or(PAGE_RECORDS)), ..request.clone() };
                let records = client.read(page).await?.into_inner().records;
                let (Some(last), false) = (records.last(), records.is_empty()) else {
                    *done = true;
                    return Ok(None);
                };
                let metered: u64 = records.iter().map(metered_bytes).sum();
                request.start = Some(pb::read_request::Start::SeqNum(last.seq_num + 1));
                request.clamp = false;
                request.count = request.count.map(|n| n.saturating_sub(records.len() as u64));
                request.bytes = request.bytes.map(|n| n.saturating_sub(metered));
                *done = request.count == Some(0) || request.bytes == Some(0);
                Ok(Some(records))
            }
        }
    }
}

/// S2's metered size of a record: 8 bytes, plus 2 per header, plus every name, value
/// and body byte.
fn metered_bytes(record: &pb::SequencedRecord) -> u64 {
    let headers: usize = record.headers.iter().map(|h| 2 + h.name.len() + h.value.len()).sum();
    (8 + headers + record.body.len()) as u64
}

/// A tracked consumer `shale read --consumer` resumes from and commits to.
struct Consumer {
    client: StreamsClient<Transport>,
    request: pb::CommitConsumerRequest,
    /// The position it had committed when the read began.
    committed: Option<u64>,
}

impl Consumer {
    async fn resume(transport: Transport, basin: &str, stream: &str, name: &str) -> Result<Self, Failure> {
        let mut client = StreamsClient::new(transport);
        let get = pb::GetConsumerRequest { basin: basin.into(), stream: stream.into(), name: name.into() };
        let committed = match client.get_consumer(get).await {
            Ok(found) => Some(found.into_inner().seq_num),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) => return Err(status.into()),
        };
        let request = pb::CommitConsumerRequest {
            basin: basin.into(),
            stream: stream.into(),
            name: name.into(),
            ..Default::default()
        };
        Ok(Self { client, request, committed })
    }

    async fn commit(&mut self, seq_num: u64) -> Result<(), Failure> {
        let request = pb::CommitConsumerRequest { seq_num, ..self.request.clone() };
        self.client.commit_consumer(request).await?;
        Ok(())
    }
}
