//! Kafka clients against a cluster of stateless `shale agent`s on the local S3 server
//! (moto): metadata with a standby, three agents, clients given one bootstrap address.
//! Idempotent acks=all producers, a classic consumer group of three and a group of two
//! under the consumer group protocol (KIP-848), coordinated by the same agent, run while
//! that agent is killed with -9, then the metadata leader; every acknowledged record is
//! stored once where its ack said, each group consumes every record (within 60 s of the
//! producers' end, before its members are told to stop), no committed offset moves
//! backwards, and no member re-reads below an acknowledged commit. KafkaJS and the
//! Java client run their steps against three agents as against one server.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use tokio::time::Instant;

use common::cluster::{agents_with_standby, metric, wait_for_lease, wait_until};
use common::{kafka_script, python, run_java, run_kafkajs, run_python, stop_with_test, terminate};

const TOPIC: &str = "orders";
const PARTITIONS: usize = 6;
const GROUP: &str = "billing";
/// The consumer-protocol group's name: the first of `billing-kip848-N` coordinated by the
/// classic group's coordinator, so one kill moves both.
const KIP848_GROUP: &str = "billing-kip848";
/// Each producer's records and pace: about 20 s of producing.
const COUNT: usize = 4000;
const RATE: usize = 200;

fn spawn_python(args: &[&str]) -> Child {
    let child = Command::new(python()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    stop_with_test(&child);
    child
}

const CREATE_TOPIC: &str = r#"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
for future in admin.create_topics([NewTopic(sys.argv[2], num_partitions=int(sys.argv[3]))]).values():
    future.result(20)
"#;

/// The brokers a Metadata answer lists, as `host:port` lines.
const BROKERS: &str = r#"
import sys
from confluent_kafka.admin import AdminClient
metadata = AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=10)
print("\n".join(sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values())))
"#;

/// Each partition of every topic in the log directory of exactly one agent, its leader in
/// Metadata (kafka-python's `describe_log_dirs` asks every broker); prints how many.
const ONE_LOG_DIR_EACH: &str = r#"
import collections, sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1])
held = collections.defaultdict(list)
for broker in admin.describe_log_dirs():
    for log_dir in broker["log_dirs"]:
        for topic in log_dir["topics"]:
            for p in topic["partitions"]:
                held[(topic["name"], p["partition_index"])].append(broker["broker"])
leaders = {(t["name"], p["partition_index"]): [p["leader_id"]] for t in admin.describe_topics() for p in t["partitions"]}
assert dict(held) == leaders, (dict(held), leaders)
print(len(leaders))
"#;

/// An idempotent producer writes three records to each partition of a topic; then each
/// partition's leader (kafka-python's `describe_producers` asks it) lists that producer
/// alone, at its last sequence. Prints how many partitions it checked.
const ONE_PRODUCER_EACH: &str = r#"
import sys
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
for p in range(count):
    for i in range(3):
        producer.send(topic, b"x%d" % i, partition=p)
producer.flush()
states = KafkaAdminClient(bootstrap_servers=bootstrap).describe_producers(
    [TopicPartition(topic, p) for p in range(count)])
ids = set()
for p in range(count):
    rows = states[TopicPartition(topic, p)].active_producers
    assert [(s.producer_epoch, s.last_sequence) for s in rows] == [(0, 2)], (p, rows)
    ids.add(rows[0].producer_id)
assert len(ids) == 1, ids
print(count)
"#;

/// Waits until the first agent's Metadata lists every agent (each joins the others' lists
/// at its next heartbeat); that agent's address, to bootstrap from.
async fn every_agent_listed(agents: &[common::cluster::Agent]) -> String {
    let bootstrap = agents[0].kafka.clone();
    let mut expected: Vec<String> = agents.iter().map(|a| a.kafka.clone()).collect();
    expected.sort();
    wait_until("Metadata lists every agent", Duration::from_secs(10), || async {
        run_python(&["-c", BROKERS, &bootstrap]).lines().eq(expected.iter().map(String::as_str))
    })
    .await;
    bootstrap
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Events of one member's log (see `group_member.py`).
#[derive(Debug)]
enum Event {
    Assign { at: f64, partitions: Vec<usize> },
    Msg { partition: usize, offset: u64, value: String },
    Commit { at: f64, partition: usize, offset: u64 },
}

fn events(path: &std::path::Path) -> Vec<Event> {
    let mut out = Vec::new();
    for line in lines(path) {
        let f: Vec<&str> = line.split(' ').collect();
        let at = || f[1].parse::<f64>().unwrap();
        match f[0] {
            "assign" => {
                out.push(Event::Assign { at: at(), partitions: f[2..].iter().map(|p| p.parse().unwrap()).collect() })
            }
            "msg" => out.push(Event::Msg {
                partition: f[2].parse().unwrap(),
                offset: f[3].parse().unwrap(),
                value: f[4].to_string(),
            }),
            // A partition with nothing consumed yet commits no offset (librdkafka reports -1001).
            "commit" => {
                if let Ok(offset) = f[3].parse::<u64>() {
                    out.push(Event::Commit { at: at(), partition: f[2].parse().unwrap(), offset });
                }
            }
            _ => {}
        }
    }
    out
}

/// Drops what an agent logged so far.
fn skip_logged(logs: &Receiver<String>) {
    while logs.try_recv().is_ok() {}
}

/// Sorted `(partition, offset)` pairs as runs: `p4 1633-1640, p5 1775`.
fn spans(positions: &[&(usize, u64)]) -> String {
    let mut runs: Vec<(usize, u64, u64)> = Vec::new();
    for &&(partition, offset) in positions {
        match runs.last_mut() {
            Some(run) if run.0 == partition && run.2 + 1 == offset => run.2 = offset,
            _ => runs.push((partition, offset, offset)),
        }
    }
    let shown: Vec<String> = runs.iter().map(|(p, first, last)| format!("p{p} {first}-{last}")).collect();
    shown.join(", ")
}

/// The `(partition, offset)` of every record the members' logs show consumed.
fn consumed_positions(paths: &[std::path::PathBuf]) -> HashSet<(usize, u64)> {
    let events = paths.iter().flat_map(|p| events(p));
    events
        .filter_map(|e| if let Event::Msg { partition, offset, .. } = e { Some((partition, offset)) } else { None })
        .collect()
}

/// The `(partition, offset)` of every record the producers' logs show acknowledged.
fn acked_positions(paths: &[std::path::PathBuf]) -> HashSet<(usize, u64)> {
    let acks = paths.iter().flat_map(|path| lines(path));
    acks.filter_map(|line| {
        let mut f = line.split(' ');
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    })
    .collect()
}

fn consumed(paths: &[std::path::PathBuf]) -> usize {
    paths.iter().map(|p| lines(p).iter().filter(|l| l.starts_with("msg ")).count()).sum()
}

fn acked(paths: &[std::path::PathBuf]) -> usize {
    paths.iter().map(|p| lines(p).len()).sum()
}

/// Waits for a survivor to log a broker list of `count` brokers; how long it took.
/// Lines logged before the call are skipped ([`skip_logged`]).
fn wait_for_brokers(logs: &Receiver<String>, count: usize, limit: Duration) -> Duration {
    let began = Instant::now();
    loop {
        let left = limit.checked_sub(began.elapsed()).expect("no broker list change within the bound");
        let line = logs.recv_timeout(left).expect("no broker list change within the bound");
        if let Some(list) = line.split("brokers=[").nth(1).filter(|_| line.contains("kafka brokers changed")) {
            let ids = list.split(']').next().unwrap().split(',').count();
            if ids == count {
                return began.elapsed();
            }
        }
    }
}

/// KafkaJS and Kafka's Java client unchanged against three agents: partitions led by
/// different agents, groups' and transactions' coordinators wherever the rendezvous puts
/// them. KafkaJS's steps are
/// `tests/kafkajs/kafkajs.mjs`'s, as against `shale serve`. Then a topic of six partitions
/// as consoles size it: each partition in exactly one agent's log directory, its leader's,
/// and its producer listed by its leader (over the metadata RPC, as the agents run); and
/// librdkafka's consumers under the consumer group protocol, their group coordinated by
/// one of the agents (`tests/kafka/consumer_protocol.py`). Then Kafka's Java client, the
/// steps of `tests/kafka/java/JavaClients.java` as against `shale serve`.
#[tokio::test]
async fn kafka_clients_run_unchanged_against_three_agents() {
    let (_cluster, leader, standby, _standby_http, agents) = agents_with_standby(3).await;
    let bootstrap = every_agent_listed(&agents).await;
    run_kafkajs("kafkajs.mjs", &[&bootstrap]);
    run_python(&["-c", CREATE_TOPIC, &bootstrap, TOPIC, &PARTITIONS.to_string()]);
    let partitions: usize = run_python(&["-c", ONE_LOG_DIR_EACH, &bootstrap]).trim().parse().unwrap();
    assert!(partitions >= PARTITIONS, "{partitions} partitions");
    let described: usize =
        run_python(&["-c", ONE_PRODUCER_EACH, &bootstrap, TOPIC, &PARTITIONS.to_string()]).trim().parse().unwrap();
    assert_eq!(described, PARTITIONS);
    let consumer_protocol = run_python(&[&kafka_script("consumer_protocol.py"), &bootstrap]);
    assert!(consumer_protocol.contains("every step passed"), "{consumer_protocol}");
    run_java("JavaClients.java", &[&bootstrap]);
    // Each agent counts the requests it read on its `/metrics`: every client connection
    // opens with ApiVersions, and one producer per partition produced to its leader.
    let client = reqwest::Client::new();
    let mut produces = 0;
    for agent in &agents {
        let requests = |api: &str| format!("shale_kafka_requests_total{{api=\"{api}\"}}");
        assert!(metric(&client, &agent.http, &requests("ApiVersions")).await.unwrap_or(0) >= 1, "{}", agent.http);
        produces += metric(&client, &agent.http, &requests("Produce")).await.unwrap_or(0);
    }
    assert!(produces >= PARTITIONS as u64, "{produces} Produce requests");
    for agent in agents {
        terminate(agent.child);
    }
    terminate(leader);
    terminate(standby);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_carry_on_through_a_killed_agent_and_a_metadata_failover() {
    let (cluster, leader, standby, standby_http, mut agents) = agents_with_standby(3).await;
    let client = reqwest::Client::new();
    let bootstrap = every_agent_listed(&agents).await;
    run_python(&["-c", CREATE_TOPIC, &bootstrap, TOPIC, &PARTITIONS.to_string()]);

    let dir = cluster.dir.path().to_path_buf();
    let stop = dir.join("stop");
    let acked_files: Vec<_> = (0..2).map(|n| dir.join(format!("acked-{n}"))).collect();
    let classic = Group::new(&dir, GROUP.into(), "classic", 3);
    let coordinator = run_python(&[&kafka_script("coordinator_of.py"), &bootstrap, GROUP]).trim().to_string();
    let kip848_name = (0..30)
        .map(|n| format!("{KIP848_GROUP}-{n}"))
        .find(|name| run_python(&[&kafka_script("coordinator_of.py"), &bootstrap, name]).trim() == coordinator)
        .expect("a group name the same agent coordinates");
    let kip848 = Group::new(&dir, kip848_name, "consumer", 2);
    let producers: Vec<Child> = acked_files
        .iter()
        .enumerate()
        .map(|(n, path)| {
            let name = format!("p{n}");
            let (rate, count) = (RATE.to_string(), COUNT.to_string());
            let path = path.display().to_string();
            spawn_python(&[&kafka_script("steady_producer.py"), &bootstrap, TOPIC, &name, &rate, &count, &path])
        })
        .collect();
    let members: Vec<Child> =
        [&classic, &kip848].into_iter().flat_map(|group| group.spawn_members(&bootstrap, &stop)).collect();
    wait_until("each group consumes with all its members", Duration::from_secs(60), || async {
        [&classic, &kip848].iter().all(|g| {
            consumed(&g.files) >= 600 && g.files.iter().all(|p| lines(p).iter().any(|l| l.starts_with("assign ")))
        })
    })
    .await;

    // Kill the groups' coordinator: its groups move, its partitions' leaders move.
    let victim = agents.iter().position(|a| a.kafka == coordinator).expect("the coordinator is an agent");
    let mut killed = agents.remove(victim);
    skip_logged(&agents[0].logs);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let dropped = wait_for_brokers(&agents[0].logs, 2, Duration::from_secs(10));
    println!("the killed agent dropped out of the survivors' lists after {dropped:?}");
    assert!(dropped <= Duration::from_millis(2_250 + 1_000), "dropped out after {dropped:?}: ttl 2 s + 250 ms");
    let survivor = agents[0].kafka.clone();
    let listed = run_python(&["-c", BROKERS, &survivor]);
    assert!(!listed.contains(&killed.kafka), "Metadata still lists the killed agent: {listed}");
    let (acked_at_kill, consumed_at_kill) = (acked(&acked_files), [consumed(&classic.files), consumed(&kip848.files)]);
    wait_until("produce and each group consume after the agent's kill", Duration::from_secs(60), || async {
        acked(&acked_files) >= acked_at_kill + 600
            && consumed(&classic.files) >= consumed_at_kill[0] + 600
            && consumed(&kip848.files) >= consumed_at_kill[1] + 600
    })
    .await;

    // Then the metadata leader: the standby takes over.
    let mut leader = leader;
    leader.kill().unwrap();
    leader.wait().unwrap();
    wait_for_lease(&client, &standby_http, "the standby").await;
    // The new leader learns the live agents from their heartbeats, and sees them watch it;
    // its console reads both from its metrics.
    wait_until("the new leader lists the two live agents", Duration::from_secs(10), || async {
        metric(&client, &standby_http, "shale_kafka_agents_live").await == Some(2)
            && metric(&client, &standby_http, "shale_metadata_watchers{role=\"agent\"}").await == Some(2)
    })
    .await;
    let process: serde_json::Value =
        client.get(format!("{standby_http}/console/process.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!((process["role"].as_str(), process["client_api"].as_bool()), (Some("metadata"), Some(false)));
    let (acked_at_failover, consumed_at_failover) =
        (acked(&acked_files), [consumed(&classic.files), consumed(&kip848.files)]);
    wait_until("produce and each group consume after the failover", Duration::from_secs(60), || async {
        acked(&acked_files) >= acked_at_failover + 600
            && consumed(&classic.files) >= consumed_at_failover[0] + 600
            && consumed(&kip848.files) >= consumed_at_failover[1] + 600
    })
    .await;

    for (n, producer) in producers.into_iter().enumerate() {
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::task::spawn_blocking(move || producer.wait_with_output().unwrap()),
        )
        .await
        .unwrap_or_else(|_| panic!("producer {n} did not finish within 120 s of the failover's checks"))
        .unwrap();
        assert!(out.status.success(), "producer {n}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Each group has consumed every acknowledged record before its members are told to
    // stop: a member stops after 3 s without records, and a partition whose leader moved
    // can take longer to resume; its records would then be left to members that had
    // stopped themselves.
    let acked_all = acked_positions(&acked_files);
    let began = Instant::now();
    loop {
        let unconsumed: Vec<String> = [&classic, &kip848]
            .iter()
            .filter_map(|g| {
                let consumed = consumed_positions(&g.files);
                let mut left: Vec<&(usize, u64)> = acked_all.difference(&consumed).collect();
                left.sort();
                (!left.is_empty()).then(|| format!("{}: {}", g.name, spans(&left)))
            })
            .collect();
        if unconsumed.is_empty() {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "not consumed 60 s after the producers ended: {unconsumed:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("both groups consumed every acknowledged record {:?} after the producers finished", began.elapsed());
    std::fs::write(&stop, b"").unwrap();
    for (n, member) in members.into_iter().enumerate() {
        let out = tokio::time::timeout(
            Duration::from_secs(90),
            tokio::task::spawn_blocking(move || member.wait_with_output().unwrap()),
        )
        .await
        .expect("a member did not finish within 90 s of the stop")
        .unwrap();
        assert!(out.status.success(), "member {n}: {}", String::from_utf8_lossy(&out.stderr));
    }

    let stored = check_stored(&survivor, &acked_files);
    check_group(&classic, &stored);
    check_group(&kip848, &stored);
    // An agent stopped cleanly leaves at once: the other drops it at its next heartbeat
    // (250 ms), well before the 2 s ttl would.
    let mut agents = agents.into_iter();
    let first = agents.next().unwrap();
    skip_logged(&first.logs);
    for agent in agents {
        assert!(terminate(agent.child).success());
    }
    let left = wait_for_brokers(&first.logs, 1, Duration::from_millis(1_500));
    println!("a stopped agent left the other's list after {left:?}");
    terminate(first.child);
    terminate(standby);
}

/// A consumer group of the test: its name, protocol and each member's log.
struct Group {
    name: String,
    protocol: &'static str,
    files: Vec<std::path::PathBuf>,
}

impl Group {
    fn new(dir: &std::path::Path, name: String, protocol: &'static str, members: usize) -> Group {
        let files = (0..members).map(|n| dir.join(format!("{name}-member-{n}"))).collect();
        Group { name, protocol, files }
    }

    fn spawn_members(&self, bootstrap: &str, stop: &std::path::Path) -> Vec<Child> {
        let script = kafka_script("group_member.py");
        let stop = stop.display().to_string();
        self.files
            .iter()
            .map(|path| {
                let path = path.display().to_string();
                spawn_python(&[&script, bootstrap, TOPIC, &self.name, &path, &stop, self.protocol])
            })
            .collect()
    }
}

/// Checks every acknowledged record is stored once where its ack said, and nothing else
/// is; returns what is stored, as `(partition, offset, value)`.
fn check_stored(bootstrap: &str, acked_files: &[std::path::PathBuf]) -> Vec<(usize, u64, String)> {
    // Every acknowledged record is stored exactly once, at the offset its ack named.
    let stored: Vec<(usize, u64, String)> =
        serde_json::from_str(&run_python(&[&kafka_script("read_all.py"), bootstrap, TOPIC, "positions"])).unwrap();
    let at: HashMap<(usize, u64), &str> = stored.iter().map(|(p, o, v)| ((*p, *o), v.as_str())).collect();
    let mut times_stored: HashMap<&str, usize> = HashMap::new();
    for (_, _, value) in &stored {
        *times_stored.entry(value).or_default() += 1;
    }
    let acks: Vec<(usize, u64, String)> = acked_files
        .iter()
        .flat_map(|path| lines(path))
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect();
    assert_eq!(acks.len(), 2 * COUNT, "every record was acked once the producers finished");
    for (partition, offset, value) in &acks {
        assert_eq!(times_stored.get(value.as_str()), Some(&1), "{value} stored once");
        assert_eq!(at.get(&(*partition, *offset)), Some(&value.as_str()), "{value} where its ack said");
    }
    assert_eq!(stored.len(), acks.len(), "nothing but the acked records is stored");
    // Per producer and partition, records keep the order they were sent in.
    let mut last: HashMap<(String, usize), (u64, usize)> = HashMap::new();
    for (partition, offset, value) in &stored {
        let (producer, i) = value.rsplit_once('-').unwrap();
        let i: usize = i.parse().unwrap();
        if let Some((prev_offset, prev_i)) = last.insert((producer.to_string(), *partition), (*offset, i)) {
            assert!(prev_offset < *offset && prev_i < i, "{value} after {producer}-{prev_i} on partition {partition}");
        }
    }
    stored
}

/// Checks `group` consumed every stored record, each with its stored value; that its
/// acknowledged commits never moved backwards and end at each partition's end; and that
/// no member given a partition read it from below a commit acknowledged before.
fn check_group(group: &Group, stored: &[(usize, u64, String)]) {
    let at: HashMap<(usize, u64), &str> = stored.iter().map(|(p, o, v)| ((*p, *o), v.as_str())).collect();
    let name = &group.name;
    let logs: Vec<Vec<Event>> = group.files.iter().map(|p| events(p)).collect();
    let mut times_consumed: HashMap<(usize, u64), usize> = HashMap::new();
    for event in logs.iter().flatten() {
        if let Event::Msg { partition, offset, value } = event {
            assert_eq!(at.get(&(*partition, *offset)), Some(&value.as_str()), "consumed as stored");
            *times_consumed.entry((*partition, *offset)).or_default() += 1;
        }
    }
    let mut missed: Vec<&(usize, u64)> = at.keys().filter(|k| !times_consumed.contains_key(k)).collect();
    missed.sort();
    assert!(missed.is_empty(), "{} records {name} never consumed: {}", missed.len(), spans(&missed));

    // Acknowledged commits never move backwards, and end at each partition's end.
    let mut commits: Vec<(f64, usize, u64)> = logs
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Event::Commit { at, partition, offset } => Some((*at, *partition, *offset)),
            _ => None,
        })
        .collect();
    commits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut committed: BTreeMap<usize, u64> = BTreeMap::new();
    for (at, partition, offset) in &commits {
        let before = committed.insert(*partition, *offset).unwrap_or(0);
        assert!(*offset >= before, "{name} partition {partition}: commit {offset} at {at} after {before}");
    }
    for partition in 0..PARTITIONS {
        let end = stored.iter().filter(|(p, _, _)| *p == partition).count() as u64;
        assert_eq!(
            committed.get(&partition).copied().unwrap_or(0),
            end,
            "{name} partition {partition} committed to its end"
        );
    }

    // A member given a partition starts at or after every commit acknowledged before
    // (no spurious offset 0, no re-read below a committed offset).
    for log in &logs {
        for (i, event) in log.iter().enumerate() {
            let Event::Assign { at, partitions } = event else { continue };
            for partition in partitions {
                let floor = commits.iter().filter(|c| c.0 < *at && c.1 == *partition).map(|c| c.2).max().unwrap_or(0);
                let first = log[i + 1..].iter().find_map(|e| match e {
                    Event::Msg { partition: p, offset, .. } if p == partition => Some(*offset),
                    // Given it again: checked from there (an assignment under the
                    // consumer protocol names only the partitions it adds).
                    Event::Assign { partitions: added, .. } if added.contains(partition) => Some(u64::MAX),
                    _ => None,
                });
                if let Some(first) = first.filter(|&f| f != u64::MAX) {
                    assert!(
                        first >= floor,
                        "{name} partition {partition} assigned at {at} started at {first}, below commit {floor}"
                    );
                }
            }
        }
    }
    let redelivered: usize = times_consumed.values().map(|n| n - 1).sum();
    println!(
        "{name}: {} records stored once each; consumed {} times ({redelivered} redelivered after a commit that was not acknowledged)",
        stored.len(),
        times_consumed.values().sum::<usize>()
    );
}
