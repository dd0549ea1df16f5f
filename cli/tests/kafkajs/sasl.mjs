// KafkaJS logging in over SASL with access tokens, on TLS with a custom CA: the root token
// with PLAIN creates the topics; a token scoped to the streams `orders/` with read and
// append logs in with SCRAM-SHA-256 and SCRAM-SHA-512 (its id and secret), produces to and
// consumes `orders`, sees no other topic and may not produce to one; a wrong secret is
// refused. Every step asserts; the last line says they all passed.
//   node sasl.mjs BOOTSTRAP CA_FILE ROOT_TOKEN TOKEN_ID TOKEN_SECRET
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;
const [bootstrap, caFile, root, tokenId, secret] = process.argv.slice(2);
assert.ok(secret, 'usage: node sasl.mjs BOOTSTRAP CA_FILE ROOT_TOKEN TOKEN_ID TOKEN_SECRET');
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
setTimeout(() => {
  console.error('timed out: the last step printed did not finish');
  process.exit(1);
}, 120000).unref();

const ssl = { ca: [readFileSync(caFile, 'utf8')] };
const client = (mechanism, username, password) =>
  new Kafka({
    clientId: 'kafkajs-sasl',
    brokers: [bootstrap],
    ssl,
    sasl: { mechanism, username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 1, initialRetryTime: 100 },
  });

function step(name) {
  console.log(`step: ${name}`);
}

step('the root token (PLAIN) creates two topics');
const rootAdmin = client('plain', 'root', root).admin();
await rootAdmin.connect();
assert.equal(await rootAdmin.createTopics({ topics: [{ topic: 'orders', numPartitions: 1 }, { topic: 'payroll', numPartitions: 1 }] }), true);
await rootAdmin.disconnect();

for (const mechanism of ['scram-sha-256', 'scram-sha-512']) {
  step(`the scoped token logs in with ${mechanism}, produces and consumes its topic`);
  const kafka = client(mechanism, tokenId, secret);
  const producer = kafka.producer();
  await producer.connect();
  const [ack] = await producer.send({ topic: 'orders', messages: [{ value: `via-${mechanism}` }] });
  assert.equal(ack.errorCode, 0);
  const admin = kafka.admin();
  await admin.connect();
  assert.deepEqual(await admin.listTopics(), ['orders'], 'the token sees only the topic it reaches');
  await admin.disconnect();
  await assert.rejects(
    producer.send({ topic: 'payroll', messages: [{ value: 'not mine' }] }),
    (e) => /authoriz/i.test(`${e.type} ${e.message}`),
    'producing outside the token is refused',
  );
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `g-${mechanism}`, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: 'orders', fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${values}`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString());
        if (values.includes(`via-${mechanism}`)) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
}

step('a wrong secret is refused');
const wrong = client('scram-sha-256', tokenId, `${secret}x`).producer();
await assert.rejects(wrong.connect(), (e) => e.name === 'KafkaJSSASLAuthenticationError');

step('the root token reads what the scoped token wrote; payroll stayed empty');
const rootAgain = client('plain', 'root', root).admin();
await rootAgain.connect();
const orders = await rootAgain.fetchTopicOffsets('orders');
assert.equal(Number(orders[0].high), 2);
const payroll = await rootAgain.fetchTopicOffsets('payroll');
assert.equal(Number(payroll[0].high), 0);
await rootAgain.disconnect();
console.log('every step passed');
