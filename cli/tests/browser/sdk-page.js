// Bundled for the browser by console.mjs: S2's TypeScript SDK, unchanged, appending to
// and reading from Shale from a page of another origin.
import { AppendInput, AppendRecord, S2 } from '@s2-dev/streamstore';

window.sdkRoundTrip = async ({ endpoint, token, basin, stream }) => {
  const s2 = new S2({ accessToken: token, endpoints: { account: endpoint, basin: endpoint } });
  const client = s2.basin(basin);
  await client.streams.create({ stream });
  // S2's PUT: its answer header, read across origins, says what it did.
  const ensured = [];
  for (const config of [{ retentionPolicy: { ageSecs: 3600 } }, { retentionPolicy: { ageSecs: 3600 } }]) {
    ensured.push((await client.streams.ensure({ stream, config })).result);
  }
  const ack = await client.stream(stream).append(AppendInput.create([
    AppendRecord.string({ body: 'appended by the SDK in a browser', headers: [['via', 'browser']] }),
    AppendRecord.string({ body: 'and a second record' }),
  ]));
  const batch = await client.stream(stream).read(
    { start: { from: { seqNum: 0 } }, stop: { limits: { count: 10 } } },
    { as: 'string' },
  );
  // A session started at the tail is caught up as soon as the server's first ping says
  // where the tail is (S2's pings carry it).
  const session = await client.stream(stream).readSession({ start: { from: { seqNum: 2 } } }, { as: 'string' });
  const draining = (async () => { for await (const record of session) { void record; } })().catch(() => {});
  const started = performance.now();
  const timedOut = new Promise((resolve) => { setTimeout(() => resolve('timed out'), 4000); });
  const caughtUp = await Promise.race([session.caughtUp().then((tail) => Number(tail.seqNum)), timedOut]);
  const caughtUpMs = Math.round(performance.now() - started);
  await session.cancel?.().catch(() => {});
  void draining;
  return {
    origin: window.location.origin,
    caughtUp,
    caughtUpMs,
    ensured,
    start: Number(ack.start.seqNum),
    bodies: batch.records.map((r) => r.body),
  };
};
