// `kvscope-cli serve` with the demo model, as the official openai npm client
// sees it: models, a chat completion and the same one streamed (same text at
// temperature 0, usage with cached tokens), completions streamed and not,
// OpenAI errors for a malformed body and wrong types, 401 for a wrong API key,
// and the server healthy afterwards and stopped cleanly by SIGTERM.
//   node openai_client_test.mjs KVSCOPE_CLI NODE_CLIENT_DIR
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const [cli, clientDir] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(clientDir), 'node_modules', 'index.js'));
const openai = require('openai');
const OpenAI = openai.OpenAI ?? openai.default ?? openai;

const kStartSeconds = 60;
const kStopSeconds = 30;
let running = null;  // the server process, killed if the test fails

// Starts the server on a free loopback port; resolves once it prints its URL.
function startServer(extraArgs) {
  return new Promise((resolve, reject) => {
    const proc = spawn(cli, ['serve', '--port', '0', ...extraArgs], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    running = proc;
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no URL within ${kStartSeconds} s`)),
                             kStartSeconds * 1000);
    proc.stdout.on('data', (data) => {
      out += data;
      const m = out.match(/kvscope serving (\S+) at (http:\/\/\S+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, model: m[1], baseURL: m[2] });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with ${code} before serving`));
    });
  });
}

function stopServer(server) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not stopped within ${kStopSeconds} s`)),
                             kStopSeconds * 1000);
    server.proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      running = null;
      if (code === 0) resolve();
      else reject(new Error(`the server exited with ${code ?? signal} on SIGTERM`));
    });
    server.proc.kill('SIGTERM');
  });
}

const healthURL = (server) => server.baseURL.replace(/\/v1$/, '/health');

async function expectStatus(promise, status) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.status, status, String(e));
    assert.equal(typeof e.error?.message, 'string', 'an OpenAI error object');
    return true;
  });
}

async function openServer() {
  const server = await startServer(['--temp', '0']);
  assert.equal(server.model, 'kvscope-demo.gguf');
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });

  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [server.model]);

  const chat = {
    model: server.model,
    messages: [{ role: 'user', content: 'Once upon a time' }],
    temperature: 0,
    max_tokens: 24,
  };
  const whole = await client.chat.completions.create(chat);
  const text = whole.choices[0].message.content;
  assert.ok(text.length > 0, 'a reply');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

  const stream = await client.chat.completions.create({
    ...chat,
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      streamed += choice.delta.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.equal(streamed, text, 'the streamed pieces join to the non-streaming reply');
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  // The same prompt again: all but its last token come from the KV cache.
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens - 1);

  const completion = { model: server.model, prompt: 'Lily and Tom', temperature: 0, max_tokens: 16 };
  const done = await client.completions.create(completion);
  let pieces = '';
  for await (const chunk of await client.completions.create({ ...completion, stream: true })) {
    pieces += chunk.choices[0]?.text ?? '';
  }
  assert.equal(pieces, done.choices[0].text);

  const malformed = await fetch(`${server.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: '{"messages": [',
  });
  assert.equal(malformed.status, 400);
  assert.equal((await malformed.json()).error.type, 'invalid_request_error');
  await expectStatus(client.chat.completions.create({ ...chat, messages: 'hi' }), 400);
  await expectStatus(client.chat.completions.create({ ...chat, temperature: 'hot' }), 400);
  await expectStatus(client.chat.completions.create({ ...chat, model: 'gpt-4o' }), 404);

  assert.equal((await fetch(healthURL(server))).status, 200);
  await stopServer(server);
}

async function keyedServer() {
  const server = await startServer(['--api-key', 'secret']);
  const wrong = new OpenAI({ baseURL: server.baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectStatus(wrong.models.list(), 401);
  const right = new OpenAI({ baseURL: server.baseURL, apiKey: 'secret', maxRetries: 0 });
  assert.equal((await right.models.list()).data.length, 1);
  assert.equal((await fetch(healthURL(server))).status, 200, '/health needs no key');
  await stopServer(server);
}

const deadline = setTimeout(() => {
  console.error('FAIL: the test ran past 240 s');
  running?.kill('SIGKILL');
  process.exit(1);
}, 240_000);
try {
  await openServer();
  await keyedServer();
  console.log('ok: the openai client works against kvscope-cli serve');
} catch (e) {
  console.error('FAIL:', e);
  running?.kill('SIGKILL');
  process.exitCode = 1;
}
clearTimeout(deadline);
