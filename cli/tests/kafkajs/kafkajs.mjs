// KafkaJS, unmodified, against `shale serve --kafka`: administration, idempotent and
// gzip-compressed produce, a consumer group of two members, offsets reset and set by the
// admin client, a consumer whose offset fell below the log start (KafkaJS then commits
// its default offset, -2, and starts over from the earliest record), and transactions seen
// by a read_committed consumer. Every step asserts; the last line says they all passed.
//   node kafkajs.mjs BOOTSTRAP
import assert from 'node:assert/strict';
import kafkajs from 'kafkajs';

const { Kafka, logLevel, CompressionTypes, AssignerProtocol } = kafkajs;
const bootstrap = process.argv[2];
assert.ok(bootstrap, 'usage: node kafkajs.mjs BOOTSTRAP');
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
// A step that never finishes (a client waiting on an answer it cannot use) fails the run.
setTimeout(() => {
  console.error('timed out: the last step printed did not finish');
  process.exit(1);
}, 180000).unref();

const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [bootstrap], logLevel: logLevel.NOTHING });
const TOPIC = 'js-orders';
const PARTITIONS = 3;
const TIMEOUT_MS = 30000;
// How long a consumer's fetch waits for records (KafkaJS's default is 5 s, and a
// consumer's disconnect waits for its fetch to answer).
const MAX_WAIT_MS = 1000;

function step(name) {
  console.log(`step: ${name}`);
}

/** Runs `consumer` until `done(values)` holds; every value it was given, in order of arrival. */
async function consumeUntil(consumer, done) {
  const values = [];
  let resolve;
  const finished = new Promise((r) => { resolve = r; });
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value.toString());
      if (done(values)) resolve();
    },
  });
  const timer = setTimeout(resolve, TIMEOUT_MS);
  await finished;
  clearTimeout(timer);
  return values;
}

/** The committed offsets of `groupId` on TOPIC, by partition. */
async function committed(admin, groupId) {
  const [topic] = await admin.fetchOffsets({ groupId, topics: [TOPIC] });
  return Object.fromEntries(topic.partitions.map((p) => [p.partition, Number(p.offset)]));
}

const admin = kafka.admin();
await admin.connect();

step('create a topic, and again');
assert.equal(await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: PARTITIONS }] }), true);
assert.equal(await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: PARTITIONS }] }), false);
const metadata = await admin.fetchTopicMetadata({ topics: [TOPIC] });
assert.equal(metadata.topics[0].partitions.length, PARTITIONS);
assert.ok((await admin.listTopics()).includes(TOPIC));

step('produce with an idempotent producer, plain and gzip');
const producer = kafka.producer({ idempotent: true });
await producer.connect();
const produced = [];
for (let i = 0; i < 30; i++) {
  const [ack] = await producer.send({
    topic: TOPIC,
    messages: [{ key: `k${i % 7}`, value: `plain-${i}`, headers: { n: String(i) } }],
  });
  assert.equal(ack.errorCode, 0);
  produced.push(`plain-${i}`);
}
const gzipped = Array.from({ length: 30 }, (_, i) => ({ key: `g${i}`, value: `gzip-${i}` }));
await producer.send({ topic: TOPIC, compression: CompressionTypes.GZIP, messages: gzipped });
produced.push(...gzipped.map((m) => m.value));
// Ten more on partition 0, so that it has records to delete below.
const pinned = Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: `p0-${i}` }));
await producer.send({ topic: TOPIC, messages: pinned });
produced.push(...pinned.map((m) => m.value));
const ends = await admin.fetchTopicOffsets(TOPIC);
assert.equal(ends.reduce((sum, p) => sum + Number(p.high), 0), produced.length);

step('a group of two members reads every record once');
const members = [1, 2].map(() => kafka.consumer({ groupId: 'js-group', heartbeatInterval: 500, maxWaitTimeInMs: MAX_WAIT_MS }));
const seen = [];
for (const member of members) {
  await member.connect();
  await member.subscribe({ topic: TOPIC, fromBeginning: true });
}
let resolveAll;
const all = new Promise((r) => { resolveAll = r; });
for (const member of members) {
  await member.run({
    eachMessage: async ({ message }) => {
      seen.push(message.value.toString());
      if (seen.length >= produced.length) resolveAll();
    },
  });
}
const allTimer = setTimeout(resolveAll, TIMEOUT_MS);
await all;
clearTimeout(allTimer);
assert.deepEqual([...seen].sort(), [...produced].sort(), 'every record once across the group');
const [group] = (await admin.describeGroups(['js-group'])).groups;
assert.equal(group.state, 'Stable');
assert.equal(group.members.length, 2);
const assigned = group.members.flatMap((m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment).assignment[TOPIC] ?? []);
assert.deepEqual(assigned.sort(), [0, 1, 2], 'the partitions are split between the members');
for (const member of members) await member.disconnect();
const afterGroup = await committed(admin, 'js-group');
for (const end of ends) assert.equal(afterGroup[end.partition], Number(end.high), `partition ${end.partition} committed at its end`);

step('the admin client resets the group to the earliest offsets');
await admin.resetOffsets({ groupId: 'js-group', topic: TOPIC, earliest: true });
const reset = await committed(admin, 'js-group');
for (let p = 0; p < PARTITIONS; p++) assert.ok(reset[p] < 0, `partition ${p} has no committed offset after the reset`);
const again = kafka.consumer({ groupId: 'js-group', maxWaitTimeInMs: MAX_WAIT_MS });
await again.connect();
await again.subscribe({ topic: TOPIC, fromBeginning: true });
const reread = await consumeUntil(again, (values) => values.length >= produced.length);
await again.disconnect();
assert.deepEqual([...reread].sort(), [...produced].sort(), 'the reset group reads everything again');

step('the admin client sets an offset');
await admin.setOffsets({ groupId: 'js-group', topic: TOPIC, partitions: [{ partition: 1, offset: '2' }] });
assert.equal((await committed(admin, 'js-group'))[1], 2);

step('a consumer whose offset fell below the log start starts over from the earliest');
await admin.setOffsets({ groupId: 'js-behind', topic: TOPIC, partitions: [{ partition: 0, offset: '1' }] });
const end0 = Number(ends.find((p) => p.partition === 0).high);
const start0 = end0 - 5;
await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: String(start0) }] });
const low0 = (await admin.fetchTopicOffsets(TOPIC)).find((p) => p.partition === 0);
assert.equal(Number(low0.low), start0);
const behind = kafka.consumer({ groupId: 'js-behind', maxWaitTimeInMs: MAX_WAIT_MS });
await behind.connect();
await behind.subscribe({ topic: TOPIC, fromBeginning: true });
const offsets0 = [];
await behind.run({
  eachMessage: async ({ partition, message }) => {
    if (partition === 0) offsets0.push(Number(message.offset));
  },
});
const deadline = Date.now() + TIMEOUT_MS;
while (!offsets0.includes(end0 - 1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await behind.disconnect();
assert.equal(offsets0[0], start0, 'partition 0 read from its new log start');
assert.deepEqual(offsets0.slice(0, 5), [0, 1, 2, 3, 4].map((i) => start0 + i));

step('transactions: a read_committed consumer sees commits, not aborts');
const transactional = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 });
await transactional.connect();
let tx = await transactional.transaction();
await tx.send({ topic: TOPIC, messages: [{ partition: 2, value: 'tx-committed' }] });
await tx.sendOffsets({ consumerGroupId: 'js-tx-group', topics: [{ topic: TOPIC, partitions: [{ partition: 2, offset: '3' }] }] });
await tx.commit();
tx = await transactional.transaction();
await tx.send({ topic: TOPIC, messages: [{ partition: 2, value: 'tx-aborted' }] });
await tx.sendOffsets({ consumerGroupId: 'js-tx-group', topics: [{ topic: TOPIC, partitions: [{ partition: 2, offset: '9' }] }] });
await tx.abort();
await producer.send({ topic: TOPIC, messages: [{ partition: 2, value: 'marker' }] });
assert.equal((await committed(admin, 'js-tx-group'))[2], 3, 'the committed transaction\'s offset, not the aborted one\'s');
const reader = kafka.consumer({ groupId: 'js-reader', readUncommitted: false, maxWaitTimeInMs: MAX_WAIT_MS });
await reader.connect();
await reader.subscribe({ topic: TOPIC, fromBeginning: true });
const read = await consumeUntil(reader, (values) => values.includes('marker'));
await reader.disconnect();
assert.ok(read.includes('tx-committed'), 'the committed record is read');
assert.ok(!read.includes('tx-aborted'), 'the aborted record is not');
await transactional.disconnect();

step('delete the topic');
await admin.deleteTopics({ topics: [TOPIC] });
assert.ok(!(await admin.listTopics()).includes(TOPIC));

await producer.disconnect();
await admin.disconnect();
console.log('every step passed');
