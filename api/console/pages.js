// Shale's console: the pages (basins, a basin, a stream, metrics, tables, the cluster),
// each built from the API's answers. Loaded after charts.js, before console.js.
'use strict';

// ---------- pages ----------

function newPage() {
  if (state.page) {
    state.page.timers.forEach(clearInterval);
    state.page.aborts.forEach((a) => a.abort());
  }
  state.page = { timers: [], aborts: [] };
  return state.page;
}

function every(ms, action) {
  const page = state.page;
  action();
  page.timers.push(setInterval(action, ms));
}

function route() {
  const hash = decodeURIComponent(location.hash.replace(/^#/, '')) || '/';
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  newPage();
  renderNav(parts[0] || '');
  if (!state.process.client_api && !['metrics', 'cluster'].includes(parts[0])) return clusterPage();
  switch (parts[0]) {
    case '':
    case 'basins':
      if (parts[1] && parts[2] === 'streams' && parts[3]) return streamPage(parts[1], parts.slice(3).join('/'));
      if (parts[1]) return basinPage(parts[1]);
      return basinsPage();
    case 'metrics': return metricsPage();
    case 'tables': return tablesPage(parts[1]);
    case 'cluster': return clusterPage();
    default: return show(el('p', { text: `No page at ${hash}.` }));
  }
}

function renderNav(current) {
  const items = state.process.client_api
    ? [['basins', 'Basins'], ['metrics', 'Metrics'], ['tables', 'Tables'], ['cluster', 'Cluster']]
    : [['metrics', 'Metrics'], ['cluster', 'Cluster']];
  const active = current || (state.process.client_api ? 'basins' : 'cluster');
  document.getElementById('nav').replaceChildren(...items.map(([id, label]) =>
    el('a', { href: `#/${id}`, 'aria-current': id === active ? 'page' : null }, label)));
}

// A list of names with prefix search and pages of PAGE_SIZE: `load(prefix, startAfter)`
// answers { items, has_more }; `row(item)` renders one.
function pagedList({ id, placeholder, load, columns, row }) {
  const search = el('input', { type: 'search', id: `${id}-search`, placeholder, 'aria-label': placeholder });
  const body = el('tbody', { id: `${id}-rows` });
  const status = el('span', { class: 'muted', id: `${id}-status` });
  const previous = el('button', { type: 'button', class: 'quiet', id: `${id}-previous` }, '← Previous');
  const next = el('button', { type: 'button', class: 'quiet', id: `${id}-next` }, 'Next →');
  let starts = [''];   // start_after of each page seen
  let lastName = '';
  async function loadPage() {
    const start = starts[starts.length - 1];
    try {
      const page = await load(search.value, start);
      body.replaceChildren(...page.items.map(row));
      if (!page.items.length) body.append(el('tr', {}, el('td', { colspan: columns.length, class: 'muted' }, 'Nothing here.')));
      lastName = page.items.length ? page.items[page.items.length - 1].name : '';
      next.disabled = !page.has_more;
      previous.disabled = starts.length === 1;
      status.textContent = `page ${starts.length}, ${page.items.length} shown${page.has_more ? ', more after' : ''}`;
    } catch (e) {
      body.replaceChildren(el('tr', {}, el('td', { colspan: columns.length, class: 'error' },
        e instanceof ApiFailure ? `${e.code}: ${e.message}` : String(e))));
    }
  }
  let typing;
  search.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => { starts = ['']; loadPage(); }, 200);
  });
  next.addEventListener('click', () => { starts.push(lastName); loadPage(); });
  previous.addEventListener('click', () => { if (starts.length > 1) starts.pop(); loadPage(); });
  const table = el('table', { class: 'list' },
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', { scope: 'col' }, c)))), body);
  loadPage();
  return { node: el('section', {}, el('div', { class: 'row' }, search, status), table,
    el('div', { class: 'row' }, previous, next)), reload: () => { starts = ['']; return loadPage(); } };
}

function basinsPage() {
  const list = pagedList({
    id: 'basins', placeholder: 'Basins starting with…', columns: ['Basin', 'Created', ''],
    load: async (prefix, start) => {
      const q = new URLSearchParams({ prefix, start_after: start, limit: PAGE_SIZE });
      const page = await api(`/v1/basins?${q}`);
      return { items: page.basins, has_more: page.has_more };
    },
    row: (basin) => el('tr', {},
      el('td', {}, el('a', { href: `#/basins/${encodeURIComponent(basin.name)}` }, basin.name)),
      el('td', { class: 'num' }, basin.created_at || ''),
      el('td', {}, can('delete-basin') ? el('button', { type: 'button', class: 'danger',
        'aria-label': `Delete basin ${basin.name}`, onclick: () => {
          if (confirm(`Delete basin ${basin.name} and every stream in it?`)) {
            attempt(() => api(`/v1/basins/${encodeURIComponent(basin.name)}`, { method: 'DELETE' }), `Basin ${basin.name} deleted`)
              .then(list.reload);
          }
        } }, 'Delete') : null)),
  });
  const create = can('create-basin') ? createForm('basin', 'New basin name', async (name) => {
    await api('/v1/basins', { method: 'POST', json: { basin: name } });
    list.reload();
  }) : null;
  show(el('h1', {}, 'Basins'), create, list.node);
  document.getElementById('basins-search').focus();
}

function createForm(kind, placeholder, create) {
  const input = el('input', { type: 'text', id: `create-${kind}-name`, placeholder, 'aria-label': placeholder, required: true });
  return el('form', { class: 'row', id: `create-${kind}`, onsubmit: (event) => {
    event.preventDefault();
    const name = input.value.trim();
    attempt(async () => { await create(name); input.value = ''; }, `Created ${kind} ${name}`);
  } }, input, el('button', { type: 'submit' }, `Create ${kind}`));
}

function configEditor({ id, load, save, writable }) {
  const area = el('textarea', { id, rows: 10, spellcheck: 'false', readonly: !writable, 'aria-label': 'Configuration (JSON)' });
  const reload = () => attempt(async () => { area.value = JSON.stringify(await load(), null, 2); });
  reload();
  const button = writable ? el('button', { type: 'button', id: `${id}-save`, onclick: () => attempt(async () => {
    let patch;
    try { patch = JSON.parse(area.value); } catch (e) { throw new Error(`The configuration is not JSON: ${e.message}`); }
    area.value = JSON.stringify(await save(patch), null, 2);
  }, 'Configuration saved') }, 'Save configuration') : null;
  return el('section', {}, el('h2', {}, 'Configuration'), area, button);
}

function basinPage(basin) {
  const list = pagedList({
    id: 'streams', placeholder: 'Streams starting with…', columns: ['Stream', 'Created', ''],
    load: async (prefix, start) => {
      const q = new URLSearchParams({ prefix, start_after: start, limit: PAGE_SIZE });
      const page = await api(`/v1/streams?${q}`, { basin });
      return { items: page.streams, has_more: page.has_more };
    },
    row: (stream) => el('tr', {},
      el('td', {}, el('a', { href: `#/basins/${encodeURIComponent(basin)}/streams/${encodeURIComponent(stream.name)}` }, stream.name)),
      el('td', { class: 'num' }, stream.created_at || ''),
      el('td', {}, can('delete-stream') ? el('button', { type: 'button', class: 'danger',
        'aria-label': `Delete stream ${stream.name}`, onclick: () => {
          if (confirm(`Delete stream ${stream.name}?`)) {
            attempt(() => api(streamPath(stream.name), { method: 'DELETE', basin }), `Stream ${stream.name} deleted`)
              .then(list.reload);
          }
        } }, 'Delete') : null)),
  });
  const create = can('create-stream') ? createForm('stream', 'New stream name', async (name) => {
    await api('/v1/streams', { method: 'POST', basin, json: { stream: name } });
    list.reload();
  }) : null;
  const config = can('get-basin-config') ? configEditor({
    id: 'basin-config', writable: can('reconfigure-basin'),
    load: () => api(`/v1/basins/${encodeURIComponent(basin)}`),
    save: (patch) => api(`/v1/basins/${encodeURIComponent(basin)}`, { method: 'PATCH', json: patch }),
  }) : null;
  show(el('p', { class: 'crumbs' }, el('a', { href: '#/basins' }, 'Basins'), ' / ', basin),
    el('h1', {}, basin), create, list.node, config,
    el('p', {}, el('a', { href: `#/tables/${encodeURIComponent(basin)}` }, 'Table tier status')));
  document.getElementById('streams-search').focus();
}

// ---------- a stream ----------

function streamPage(basin, stream) {
  const crumbs = el('p', { class: 'crumbs' }, el('a', { href: '#/basins' }, 'Basins'), ' / ',
    el('a', { href: `#/basins/${encodeURIComponent(basin)}` }, basin), ' / ', stream);
  const tail = el('dl', { class: 'facts', id: 'tail' });
  const refreshTail = async () => {
    try {
      const answer = await api(streamPath(stream, '/records/tail'), { basin });
      tail.replaceChildren(el('dt', {}, 'Next sequence number'), el('dd', { id: 'tail-seq', class: 'num' }, fmtNumber(answer.tail.seq_num)),
        el('dt', {}, 'Last timestamp'), el('dd', { class: 'num' }, fmtTime(answer.tail.timestamp)));
    } catch (e) {
      tail.replaceChildren(el('dd', { class: 'error' }, `${e.code || ''} ${e.message}`));
    }
  };
  if (can('check-tail')) every(SAMPLE_MS, refreshTail);
  show(crumbs, el('h1', {}, stream),
    el('section', {}, el('h2', {}, 'Tail'), tail),
    can('read') ? liveTail(basin, stream) : null,
    can('read') ? recordsBrowser(basin, stream) : null,
    can('append') ? appendForm(basin, stream) : null,
    can('trim') ? trimForm(basin, stream) : null,
    consumersPanel(basin, stream),
    can('get-stream-config') ? configEditor({
      id: 'stream-config', writable: can('reconfigure-stream'),
      load: () => api(streamPath(stream), { basin }),
      save: (patch) => api(streamPath(stream), { method: 'PATCH', basin, json: patch }),
    }) : null);
}

function recordRow(record, format) {
  const headers = (record.headers || []).map(([n, v]) => `${atobSafe(n)}: ${atobSafe(v)}`).join('\n');
  return el('tr', { 'data-seq': record.seq_num },
    el('td', { class: 'num' }, fmtNumber(record.seq_num)),
    el('td', { class: 'num' }, fmtTime(record.timestamp)),
    el('td', {}, el('pre', {}, headers)),
    el('td', {}, el('pre', { class: 'body' }, renderBytes(record.body, format))));
}

function atobSafe(text) {
  try { return new TextDecoder().decode(fromBase64(text)); } catch (_) { return text; }
}

function recordsTable(id) {
  const body = el('tbody', { id });
  return { body, table: el('table', { class: 'list records' }, el('thead', {}, el('tr', {},
    ['Seq', 'Timestamp (UTC)', 'Headers', 'Body'].map((c) => el('th', { scope: 'col' }, c)))), body) };
}

function formatPicker(id) {
  return el('select', { id, 'aria-label': 'Show bodies as' },
    el('option', { value: 'text' }, 'text'), el('option', { value: 'json' }, 'JSON'), el('option', { value: 'hex' }, 'hex'));
}

function recordsBrowser(basin, stream) {
  const from = el('select', { id: 'browse-from', 'aria-label': 'Start from' },
    el('option', { value: 'seq_num' }, 'sequence number'), el('option', { value: 'timestamp' }, 'time (ms or ISO)'),
    el('option', { value: 'tail_offset' }, 'records before the tail'));
  const at = el('input', { id: 'browse-at', type: 'text', value: '0', 'aria-label': 'Start at' });
  const format = formatPicker('browse-format');
  const { body, table } = recordsTable('browse-rows');
  let shown = [];
  const render = () => body.replaceChildren(...shown.map((r) => recordRow(r, format.value)));
  format.addEventListener('change', render);
  const load = () => attempt(async () => {
    let value = at.value.trim();
    if (from.value === 'timestamp' && !/^\d+$/.test(value)) value = String(Date.parse(value));
    const q = new URLSearchParams({ [from.value]: value, count: 50, clamp: 'true' });
    const batch = await api(streamPath(stream, `/records?${q}`), { basin, headers: { 's2-format': 'base64' } });
    shown = batch.records || [];
    render();
  });
  return el('section', {}, el('h2', {}, 'Records'),
    el('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); load(); } },
      el('label', { for: 'browse-from' }, 'From'), from, at, format, el('button', { type: 'submit', id: 'browse-load' }, 'Read 50')),
    el('div', { class: 'scroll' }, table));
}

// Follows the stream from its tail over SSE, keeping the last LIVE_ROWS records.
function liveTail(basin, stream) {
  const format = formatPicker('live-format');
  const status = el('span', { class: 'muted', id: 'live-status' }, 'not following');
  const { body, table } = recordsTable('live-rows');
  const toggle = el('button', { type: 'button', id: 'live-toggle' }, 'Follow live');
  let controller = null;
  const stop = () => { if (controller) controller.abort(); controller = null; toggle.textContent = 'Follow live'; status.textContent = 'not following'; };
  toggle.addEventListener('click', () => {
    if (controller) return stop();
    controller = new AbortController();
    state.page.aborts.push(controller);
    toggle.textContent = 'Stop';
    follow(basin, stream, controller.signal, format, body, status).catch((e) => {
      if (e.name !== 'AbortError') status.textContent = `stopped: ${e.message}`;
      controller = null;
      toggle.textContent = 'Follow live';
    });
  });
  return el('section', {}, el('h2', {}, 'Live tail'),
    el('div', { class: 'row' }, toggle, format, status),
    el('div', { class: 'scroll live' }, table));
}

async function follow(basin, stream, signal, format, body, status) {
  const tail = await api(streamPath(stream, '/records/tail'), { basin, signal });
  const q = new URLSearchParams({ seq_num: tail.tail.seq_num });
  const response = await api(streamPath(stream, `/records?${q}`), {
    basin, signal, raw: true, headers: { accept: 'text/event-stream', 's2-format': 'base64' },
  });
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  status.textContent = `following from ${fmtNumber(tail.tail.seq_num)}`;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event.type === 'batch') {
        const batch = JSON.parse(event.data);
        for (const record of batch.records) body.prepend(recordRow(record, format.value));
        while (body.children.length > LIVE_ROWS) body.lastChild.remove();
        if (batch.tail) status.textContent = `following, tail ${fmtNumber(batch.tail.seq_num)}`;
      } else if (event.type === 'error') {
        throw new Error(event.data);
      }
    }
  }
  status.textContent = 'the read ended';
}

function parseEvent(text) {
  const event = { type: 'message', data: '' };
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event.type = value;
    else if (field === 'data') event.data += (event.data ? '\n' : '') + value;
  }
  return event;
}

function appendForm(basin, stream) {
  const body = el('textarea', { id: 'append-body', rows: 3, 'aria-label': 'Record body', placeholder: 'Record body' });
  const headers = el('textarea', { id: 'append-headers', rows: 2, 'aria-label': 'Headers, one name: value per line', placeholder: 'name: value (one per line)' });
  return el('section', {}, el('h2', {}, 'Append a record'),
    el('form', { id: 'append-form', onsubmit: (e) => {
      e.preventDefault();
      const pairs = headers.value.split('\n').filter((l) => l.trim()).map((l) => {
        const i = l.indexOf(':');
        return i < 0 ? [l.trim(), ''] : [l.slice(0, i).trim(), l.slice(i + 1).trim()];
      });
      attempt(async () => {
        const ack = await api(streamPath(stream, '/records'), { method: 'POST', basin, json: { records: [{ body: body.value, headers: pairs }] } });
        body.value = '';
        notice(`Appended at ${ack.start.seq_num}`, 'ok');
      });
    } }, body, headers, el('button', { type: 'submit', id: 'append-submit' }, 'Append')));
}

// A trim is S2's command record: one header with an empty name and the value `trim`,
// the body the first sequence number to keep, 8 bytes big-endian.
function trimForm(basin, stream) {
  const at = el('input', { id: 'trim-at', type: 'number', min: '0', 'aria-label': 'Keep records from' });
  return el('section', {}, el('h2', {}, 'Trim'),
    el('form', { class: 'row', onsubmit: (e) => {
      e.preventDefault();
      const seq = BigInt(at.value || '0');
      if (!confirm(`Remove every record before ${seq}?`)) return;
      const bytes = new Uint8Array(8);
      new DataView(bytes.buffer).setBigUint64(0, seq);
      attempt(() => api(streamPath(stream, '/records'), {
        method: 'POST', basin, headers: { 's2-format': 'base64' },
        json: { records: [{ headers: [['', btoa('trim')]], body: toBase64(bytes) }] },
      }), `Trimmed before ${seq}`);
    } }, el('label', { for: 'trim-at' }, 'Keep records from'), at, el('button', { type: 'submit', class: 'danger', id: 'trim-submit' }, 'Trim')));
}

function consumersPanel(basin, stream) {
  const rows = el('tbody', { id: 'consumer-rows' });
  const chart = lineChart({ id: 'lag-chart', unit: 'records behind' });
  const history = new Map();   // consumer -> [lag records]
  const sample = async () => {
    try {
      const answer = await api(streamPath(stream, '/consumers?limit=100'), { basin });
      rows.replaceChildren(...answer.consumers.map((c) => el('tr', { 'data-consumer': c.name },
        el('td', {}, c.name), el('td', { class: 'num' }, fmtNumber(c.seq_num)),
        el('td', { class: 'num lag-records' }, fmtNumber(c.lag.records)), el('td', { class: 'num' }, fmtBytes(c.lag.bytes)),
        el('td', { class: 'num' }, `${fmtNumber(c.lag.seconds)} s`), el('td', { class: 'num' }, fmtTime(c.updated_at_ms)))));
      if (!answer.consumers.length) rows.append(el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No tracked consumer or Kafka group on this stream.')));
      for (const c of answer.consumers) {
        const series = history.get(c.name) || [];
        series.push(c.lag.records);
        if (series.length > CHART_POINTS) series.shift();
        history.set(c.name, series);
      }
      chart.draw([...history.entries()].map(([name, values]) => ({ name, values })));
    } catch (e) {
      rows.replaceChildren(el('tr', {}, el('td', { colspan: 6, class: 'error' }, `${e.code || ''} ${e.message}`)));
    }
  };
  every(SAMPLE_MS, sample);
  const name = el('input', { id: 'commit-name', type: 'text', placeholder: 'consumer', 'aria-label': 'Consumer name' });
  const position = el('input', { id: 'commit-seq', type: 'number', min: '0', placeholder: 'next sequence number', 'aria-label': 'Position to commit' });
  const commit = can('read') ? el('form', { class: 'row', id: 'commit-form', onsubmit: (e) => {
    e.preventDefault();
    attempt(async () => {
      await api(streamPath(stream, `/consumers/${encodeURIComponent(name.value)}`), { method: 'PUT', basin, json: { seq_num: Number(position.value) } });
      await sample();
    }, 'Position committed');
  } }, name, position, el('button', { type: 'submit' }, 'Commit position')) : null;
  return el('section', {}, el('h2', {}, 'Consumers and lag'),
    el('table', { class: 'list' }, el('thead', {}, el('tr', {},
      ['Consumer', 'Position', 'Lag (records)', 'Lag (bytes)', 'Lag (time)', 'Committed'].map((c) => el('th', { scope: 'col' }, c)))), rows),
    chart.node, commit);
}

// ---------- /metrics ----------

function metricsPage() {
  const charts = {
    records: lineChart({ id: 'chart-records', unit: 'records/s' }),
    bytes: lineChart({ id: 'chart-bytes', unit: 'MiB/s' }),
    latency: lineChart({ id: 'chart-latency', unit: 'ms' }),
    reads: lineChart({ id: 'chart-reads', unit: 'per s' }),
  };
  const series = { records: [], bytes: [], p50: [], p99: [], reads: [], gets: [] };
  const status = el('p', { class: 'muted', id: 'metrics-status' }, 'sampling /metrics every 2 s');
  let previous = null, previousAt = 0;
  const push = (key, value) => { series[key].push(value); if (series[key].length > CHART_POINTS) series[key].shift(); };
  every(SAMPLE_MS, async () => {
    try {
      const text = await api('/metrics');
      const now = performance.now();
      const samples = parseMetrics(typeof text === 'string' ? text : '');
      if (previous) {
        const secs = (now - previousAt) / 1000;
        const rate = (name) => ((sumOf(samples, name) || 0) - (sumOf(previous, name) || 0)) / secs;
        push('records', rate('shale_records_acked_total'));
        push('bytes', rate('shale_append_metered_bytes_total') / 1048576);
        const p50 = quantileBetween(previous, samples, 'shale_append_seconds', 0.5);
        const p99 = quantileBetween(previous, samples, 'shale_append_seconds', 0.99);
        push('p50', p50 === undefined ? NaN : p50 * 1000);
        push('p99', p99 === undefined ? NaN : p99 * 1000);
        let reads = 0;
        for (const [key, value] of samples) {
          if (key.startsWith('shale_api_requests_total{') && key.includes('records"') && key.includes('method="GET"')) {
            reads += value - (previous.get(key) || 0);
          }
        }
        push('reads', reads / secs);
        push('gets', rate('shale_object_gets_total'));
        charts.records.draw([{ name: 'appended records', values: series.records }]);
        charts.bytes.draw([{ name: 'appended', values: series.bytes }]);
        charts.latency.draw([{ name: 'ack p50', values: series.p50 }, { name: 'ack p99', values: series.p99 }]);
        charts.reads.draw([{ name: 'read requests', values: series.reads }, { name: 'store GETs', values: series.gets }]);
        status.textContent = `sampled at ${new Date().toISOString()}`;
      }
      previous = samples; previousAt = now;
    } catch (e) {
      status.textContent = `${e.code || ''} ${e.message}`;
    }
  });
  show(el('h1', {}, 'Metrics'), status,
    el('section', { class: 'grid' },
      el('div', {}, el('h2', {}, 'Appends'), charts.records.node),
      el('div', {}, el('h2', {}, 'Throughput'), charts.bytes.node),
      el('div', {}, el('h2', {}, 'Ack latency'), charts.latency.node),
      el('div', {}, el('h2', {}, 'Reads'), charts.reads.node)));
}

// ---------- the table tier ----------

async function tablesPage(basin) {
  const picker = el('select', { id: 'tables-basin', 'aria-label': 'Basin' });
  const out = el('div', { id: 'tables-status' });
  show(el('h1', {}, 'Table tier'), el('div', { class: 'row' }, el('label', { for: 'tables-basin' }, 'Basin'), picker), out);
  try {
    const page = await api(`/v1/basins?${new URLSearchParams({ limit: 1000 })}`);
    picker.replaceChildren(...page.basins.map((b) => el('option', { value: b.name, selected: b.name === basin }, b.name)));
  } catch (e) { out.textContent = `${e.code || ''} ${e.message}`; return; }
  picker.addEventListener('change', () => { location.hash = `#/tables/${encodeURIComponent(picker.value)}`; });
  const chosen = basin || picker.value;
  if (!chosen) { out.textContent = 'No basin yet.'; return; }
  every(SAMPLE_MS * 5, async () => {
    try {
      const status = await api(`/v1/basins/${encodeURIComponent(chosen)}/tables`);
      const where = status.metadata_location;
      out.replaceChildren(
        el('dl', { class: 'facts' },
          el('dt', {}, 'Location'), el('dd', {}, status.location || '–'),
          el('dt', {}, 'Tiered after'), el('dd', { class: 'num' }, `${fmtNumber(status.after_secs)} s`),
          el('dt', {}, 'Passes'), el('dd', { class: 'num' }, fmtNumber(status.passes)),
          el('dt', {}, 'Rows'), el('dd', { class: 'num' }, fmtNumber(status.rows)),
          el('dt', {}, 'Data files'), el('dd', { class: 'num' }, fmtNumber((status.files || []).length))),
        where ? el('section', {}, el('h2', {}, 'Read it'),
          el('pre', { class: 'copy', id: 'tables-duckdb' }, `-- DuckDB, with the iceberg extension\nSELECT count(*) FROM iceberg_scan('${where}');`),
          el('pre', { class: 'copy', id: 'tables-pyiceberg' }, `# pyiceberg\nfrom pyiceberg.table import StaticTable\nStaticTable.from_metadata("${where}").scan().to_arrow()`))
          : el('p', { class: 'muted' }, 'Nothing tiered yet (tiering is set per basin: tables in its configuration).'),
        el('table', { class: 'list' }, el('thead', {}, el('tr', {}, ['Stream', 'Tiered through', 'Tail', 'Lag (records)'].map((c) => el('th', { scope: 'col' }, c)))),
          el('tbody', {}, status.streams.map((s) => el('tr', {}, el('td', {}, s.stream), el('td', { class: 'num' }, fmtNumber(s.tiered_seq)),
            el('td', { class: 'num' }, fmtNumber(s.tail)), el('td', { class: 'num' }, fmtNumber(s.lag_records)))))));
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error' }, `${e.code || ''} ${e.message}`));
    }
  });
}

// ---------- the cluster, as this process sees it ----------

function clusterPage() {
  const facts = el('dl', { class: 'facts', id: 'cluster-facts' });
  const work = el('dl', { class: 'facts', id: 'cluster-work' });
  const fact = (label, value) => [el('dt', {}, label), el('dd', { class: 'num' }, value)];
  every(SAMPLE_MS, async () => {
    const health = await fetch('/health').then((r) => r.ok ? 'ok' : `HTTP ${r.status}`).catch((e) => String(e));
    const ready = await fetch('/ready').then(async (r) => r.ok ? 'ready' : await r.text()).catch((e) => String(e));
    let samples = new Map();
    let refused = '';
    try { samples = parseMetrics(await api('/metrics')); } catch (e) { refused = `${e.code}: ${e.message}`; }
    const get = (name) => sumOf(samples, name);
    const leader = get('shale_metadata_leader');
    const allInOne = state.process.role === 'all-in-one';
    const leaderText = allInOne ? 'in this process' : leader === undefined ? 'remote (its own console says more)'
      : leader ? 'yes, this instance' : 'no, a standby';
    facts.replaceChildren(
      ...fact('Role', state.process.role), ...fact('Version', state.process.version),
      ...fact('Health', health), ...fact('Ready', ready),
      ...fact('Metadata leader', leaderText),
      ...fact('CPU', get('process_cpu_seconds_total') === undefined ? '–' : `${fmtNumber(get('process_cpu_seconds_total'))} s`),
      ...fact('Resident memory', fmtBytes(get('process_resident_memory_bytes'))),
      ...(refused ? fact('Metrics', refused) : []));
    work.replaceChildren(
      ...fact('Segments written', fmtNumber(get('shale_segments_written_total'))),
      ...fact('Compaction passes', fmtNumber(get('shale_compaction_passes_total'))),
      ...fact('Compaction read / written', `${fmtBytes(get('shale_compaction_bytes_read_total'))} / ${fmtBytes(get('shale_compaction_bytes_written_total'))}`),
      ...fact('Uncompacted', fmtBytes(get('shale_compaction_uncompacted_bytes'))),
      ...fact('Compaction lag', get('shale_compaction_lag_seconds') === undefined ? '–' : `${fmtNumber(get('shale_compaction_lag_seconds'))} s`),
      ...fact('Reclaim passes', fmtNumber(get('shale_reclaim_runs_total'))),
      ...fact('Reclaimed', fmtBytes(get('shale_reclaim_bytes_deleted_total'))),
      ...fact('Orphans collected', fmtNumber(get('shale_gc_orphans_deleted_total'))),
      ...fact('Live segments (last reclaim pass)', fmtNumber(get('shale_store_live_segments'))),
      ...fact('Live bytes (last reclaim pass)', fmtBytes(get('shale_store_live_bytes'))),
      ...fact('Kafka agents registered', agentsText(samples, allInOne)),
      ...fact('Processes served', watchersText(samples, allInOne)));
  });
  show(el('h1', {}, 'Cluster'), el('p', { class: 'muted' }, 'This process, and what its metrics say of the work around it.'),
    el('section', { class: 'grid' }, el('div', {}, el('h2', {}, 'Process'), facts), el('div', {}, el('h2', {}, 'Background work'), work)));
}

// The live Kafka agents metadata knows (`shale_kafka_agent` series), where it runs here.
function agentsText(samples, allInOne) {
  const live = sumOf(samples, 'shale_kafka_agents_live');
  if (live === undefined) return 'metadata runs elsewhere (its console lists them)';
  const addresses = [...samples.keys()].map((k) => k.match(/^shale_kafka_agent\{id="(\d+)",address="([^"]*)"/))
    .filter(Boolean).map((m) => `${m[2]} (broker ${m[1]})`);
  if (!live) return allInOne ? 'none: this process serves Kafka itself when started with --kafka' : 'none';
  return `${live}: ${addresses.join(', ')}`;
}

// The processes watching this metadata instance (`shale_metadata_watcher` series):
// gateways, readers, agents and compactors, each with its HTTP address.
function watchersText(samples, allInOne) {
  // Metadata's membership series come together: the agent count is always there.
  if (sumOf(samples, 'shale_kafka_agents_live') === undefined) return 'metadata runs elsewhere (its console lists them)';
  const seen = [...samples.keys()].map((k) => k.match(/^shale_metadata_watcher\{role="([^"]*)",address="([^"]*)"/))
    .filter(Boolean).map((m) => `${m[1]} ${m[2]}`);
  if (!seen.length) return allInOne ? 'this process alone (all roles in one)' : 'none connected';
  return seen.join(', ');
}
