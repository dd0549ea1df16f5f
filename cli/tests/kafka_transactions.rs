//! Exactly once through failures: a transactional consume-transform-produce loop
//! (confluent-kafka, `tests/kafka/eos_pipeline.py`) over 10,000 input records on a
//! cluster of three agents and a metadata leader with a standby on the local S3 server,
//! while the group's coordinator agent, the transaction's coordinator agent and the
//! pipeline process itself are killed with -9 and the metadata leader fails over. The
//! output topic ends with exactly one result per input record.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::cluster::{agents_with_standby, wait_for_lease, Agent};
use common::{kafka_script, python, run_python, terminate};

const INPUT: &str = "eos-in";
const OUTPUT: &str = "eos-out";
const GROUP: &str = "eos-group";
const TXID: &str = "eos-pipeline";
const PARTITIONS: usize = 4;
const RECORDS: usize = 10_000;

const PREPARE: &str = r#"
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, source, sink, partitions, records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
admin = AdminClient({"bootstrap.servers": bootstrap})
for future in admin.create_topics([NewTopic(t, num_partitions=partitions) for t in [source, sink]]).values():
    future.result(20)
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
for i in range(records):
    p.produce(source, value=f"in-{i}".encode(), partition=i % partitions)
assert p.flush(60) == 0
"#;

/// Every committed record of a topic, read from the start: `total distinct` and the
/// values that are missing or repeated.
const READ_OUTPUT: &str = r#"
import collections, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, partitions, records = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check", "isolation.level": "read_committed",
              "enable.auto.commit": False, "enable.partition.eof": True})
c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
values, ended, deadline = [], set(), time.time() + 120
while len(ended) < partitions and time.time() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        if m.error().code() == -191:
            ended.add(m.partition())
        continue
    values.append(m.value().decode())
counts = collections.Counter(values)
expected = {f"out-in-{i}" for i in range(records)}
missing = sorted(expected - set(counts))[:5]
repeated = sorted(v for v, n in counts.items() if n > 1)[:5]
unexpected = sorted(set(counts) - expected)[:5]
print(len(values), len(counts), missing, repeated, unexpected)
"#;

fn committed(progress: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(progress).unwrap_or_default();
    text.lines().filter_map(|l| l.strip_prefix("commit ")).map(|n| n.parse::<usize>().unwrap()).sum()
}

/// The pipeline, started again whenever it exits or is killed before it is done; its
/// output goes to `log`.
struct Supervised {
    child: Child,
    args: Vec<String>,
    log: std::path::PathBuf,
    starts: usize,
}

impl Supervised {
    fn start(args: Vec<String>, log: std::path::PathBuf) -> Supervised {
        let child = Self::spawn(&args, &log);
        Supervised { child, args, log, starts: 1 }
    }

    fn spawn(args: &[String], log: &std::path::Path) -> Child {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let err = out.try_clone().unwrap();
        let child =
            Command::new(python()).args(args).stdout(Stdio::from(out)).stderr(Stdio::from(err)).spawn().unwrap();
        common::stop_with_test(&child);
        child
    }

    /// The last lines it wrote, librdkafka's own logs (`%` lines) included: a stall's
    /// cause is in them.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// What it said about aborts, gaps in its input and fatal errors (the last 40): what
    /// explains a missing or repeated output.
    fn events(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> =
            text.lines().filter(|l| ["aborting", "gap", "fatal"].iter().any(|word| l.starts_with(word))).collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Starts it again if it stopped without finishing; true once it finished.
    fn check(&mut self) -> bool {
        match self.child.try_wait().unwrap() {
            Some(status) if status.success() => true,
            Some(status) => {
                println!("pipeline exited with {status}: starting it again");
                self.restart();
                false
            }
            None => false,
        }
    }

    fn restart(&mut self) {
        self.child = Self::spawn(&self.args, &self.log);
        self.starts += 1;
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.restart();
    }
}

/// The agent coordinating `key` (as a group name: transactional ids are spread over the
/// agents by the same hash).
fn coordinator_of(bootstrap: &str, key: &str) -> String {
    run_python(&[&kafka_script("coordinator_of.py"), bootstrap, key]).trim().to_string()
}

fn kill_agent(agents: &mut Vec<Agent>, kafka: &str) {
    let victim = agents.iter().position(|a| a.kafka == kafka).expect("the coordinator is an agent");
    let mut killed = agents.remove(victim);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    println!("killed agent {kafka}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_pipeline_outputs_each_input_once_through_kills_and_a_failover() {
    let (cluster, leader, standby, standby_http, mut agents) = agents_with_standby(3).await;
    let client = reqwest::Client::new();
    let bootstrap = agents.iter().map(|a| a.kafka.clone()).collect::<Vec<_>>().join(",");
    run_python(&["-c", PREPARE, &bootstrap, INPUT, OUTPUT, &PARTITIONS.to_string(), &RECORDS.to_string()]);

    let progress = cluster.dir.path().join("progress");
    let args = [
        kafka_script("eos_pipeline.py"),
        bootstrap.clone(),
        INPUT.into(),
        OUTPUT.into(),
        GROUP.into(),
        TXID.into(),
        PARTITIONS.to_string(),
        RECORDS.to_string(),
        progress.display().to_string(),
    ];
    let mut pipeline = Supervised::start(args.to_vec(), cluster.dir.path().join("pipeline.log"));
    let mut leader = Some(leader);
    // Each fault once the pipeline has committed this many more records.
    let faults = ["group coordinator", "pipeline", "transaction coordinator", "metadata leader", "pipeline again"];
    let mut next_fault = 0;
    let started = tokio::time::Instant::now();
    loop {
        if started.elapsed() > Duration::from_secs(300) {
            let agent_logs: Vec<String> = agents
                .iter()
                .map(|a| {
                    let lines: Vec<String> = a.logs.try_iter().collect();
                    lines[lines.len().saturating_sub(15)..].join("\n")
                })
                .collect();
            panic!(
                "the pipeline did not finish within 300 s ({} records committed); its output:\n{}\nagents:\n{}",
                committed(&progress),
                pipeline.tail(),
                agent_logs.join("\n----\n")
            );
        }
        if pipeline.check() {
            break;
        }
        let done = committed(&progress);
        if next_fault < faults.len() && done >= (next_fault + 1) * RECORDS / (faults.len() + 2) {
            println!("{done} records committed: killing the {}", faults[next_fault]);
            match faults[next_fault] {
                "group coordinator" | "transaction coordinator" => {
                    let key = if next_fault == 0 { GROUP } else { TXID };
                    let live = agents.iter().map(|a| a.kafka.clone()).collect::<Vec<_>>().join(",");
                    let coordinator = coordinator_of(&live, key);
                    kill_agent(&mut agents, &coordinator);
                    agents.push(cluster.start_agent());
                }
                "metadata leader" => {
                    let mut old = leader.take().unwrap();
                    old.kill().unwrap();
                    old.wait().unwrap();
                    wait_for_lease(&client, &standby_http, "the standby").await;
                }
                _ => pipeline.kill(),
            }
            next_fault += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(next_fault, faults.len(), "every fault happened before the pipeline finished");
    println!("pipeline finished after {} starts in {:?}", pipeline.starts, started.elapsed());

    let live = agents.iter().map(|a| a.kafka.clone()).collect::<Vec<_>>().join(",");
    let checked = run_python(&["-c", READ_OUTPUT, &live, OUTPUT, &PARTITIONS.to_string(), &RECORDS.to_string()]);
    assert_eq!(
        checked.trim(),
        format!("{RECORDS} {RECORDS} [] [] []"),
        "total, distinct, missing, repeated, unexpected; the pipeline's aborts and gaps:\n{}",
        pipeline.events()
    );
    for agent in agents {
        terminate(agent.child);
    }
    terminate(standby);
}
