// A client of Foxglove's WebSocket protocol that is not ours: Foxglove's
// `@foxglove/ws-protocol` (npm) over the `ws` package, run by
// crates/fastio-cli/tests/view.rs against `fastio run --view` / `fastio view`.
//
//   node client.cjs MODE URL [SECONDS]
//
// MODE `check`: connects once briefly (takes one message, leaves), then again
// for the whole run; subscribes to every channel; decodes each
// foxglove.RawImage of camera/image/image and checks every pixel against the
// camera's formula (crates/fastio-examples/src/bin/camera.rs), the frame's
// number taken from camera/image/frame, whose min/max/mean must be those of
// the pixels; checks src/v/frame against fio-streamop's words; keeps the
// last message of every operators/<name> channel, the log lines and the
// `run` end message, and prints one JSON summary line on stdout when the end
// came (exit 0), or exits 1 with the reason.
// MODE `read`: subscribes to every channel and reads (the bench's clients).
// MODE `idle`: subscribes to every channel and then never reads its socket
// (from 300 ms after connecting, or, with IDLE_IMAGE_CHANNELS=N, from the
// first message of the N-th image channel: it then prints one line).
// MODE `garbage`: sends random bytes and invalid JSON, over WebSocket and over
// a raw TCP connection, until SECONDS passed.
"use strict";

const net = require("net");
const WebSocket = require("ws");
const { FoxgloveClient } = require("@foxglove/ws-protocol");

const [mode, url, secondsArg] = process.argv.slice(2);
const seconds = Number(secondsArg || 60);
// The subprotocol Foxglove's SDK serves (inline schemas).
const SUBPROTOCOL = "foxglove.sdk.v1";

function fail(why) {
  process.stderr.write(`client ${mode}: ${why}\n`);
  process.exit(1);
}
setTimeout(() => fail(`no end within ${seconds} s`), seconds * 1000).unref();

// Protobuf wire format: the fields of one message, by number.
function protoFields(buf) {
  const fields = {};
  let i = 0;
  const varint = () => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error("truncated varint");
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const field = key >> 3;
    const wire = key & 7;
    let value;
    if (wire === 0) value = varint();
    else if (wire === 5) {
      value = buf.readUInt32LE(i);
      i += 4;
    } else if (wire === 1) {
      value = buf.readBigUInt64LE(i);
      i += 8;
    } else if (wire === 2) {
      const n = Number(varint());
      value = buf.subarray(i, i + n);
      i += n;
    } else throw new Error(`wire type ${wire}`);
    fields[field] = value;
  }
  return fields;
}

// foxglove.RawImage: timestamp 1, frame_id 7, width 2, height 3, encoding 4,
// step 5, data 6.
function rawImage(buf) {
  const f = protoFields(buf);
  const ts = f[1] ? protoFields(f[1]) : {};
  return {
    sec: Number(ts[1] || 0n),
    nsec: Number(ts[2] || 0n),
    frameId: f[7] ? f[7].toString() : "",
    width: f[2],
    height: f[3],
    encoding: f[4] ? f[4].toString() : "",
    step: f[5],
    data: f[6] || Buffer.alloc(0),
  };
}

// foxglove.Log: timestamp 1, level 2, message 3, name 4.
function logMessage(buf) {
  const f = protoFields(buf);
  return {
    level: Number(f[2] || 0n),
    message: f[3] ? f[3].toString() : "",
    name: f[4] ? f[4].toString() : "",
  };
}

// The camera's pixel (x, y), channel c, of frame `seq` (camera.rs); null
// where the disc's edge is too close to call across two libms.
function discCentre(seq, h, w) {
  return [(w / 2) * (1 + 0.8 * Math.cos(seq / 40)), (h / 2) * (1 + 0.8 * Math.sin(seq / 55))];
}
function cameraPixel([cx, cy], seq, h, w, x, y, c) {
  const d2 = (x - cx) ** 2 + (y - cy) ** 2;
  if (Math.abs(d2 - 400) < 1e-6) return null;
  const disc = d2 < 400 ? 200 : 0;
  if (c === 0) return Math.min(255, Math.floor(Math.floor((x * 255) / w) / 4) + disc);
  if (c === 1) return Math.min(255, Math.floor(Math.floor((y * 255) / h) / 4) + disc);
  return seq % 64;
}

// fio-streamop's word i of source frame seq (`stages` 0 at the source).
function word(seq, i) {
  if (i === 0) return 0;
  return (Math.imul(seq >>> 0, 2654435761 | 0) + i) >>> 0;
}

function near(a, b) {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

function connect() {
  const ws = new WebSocket(url, [SUBPROTOCOL]);
  const client = new FoxgloveClient({ ws });
  return { ws, client };
}

function subscribeAll(client, channels) {
  const subs = new Map();
  client.on("advertise", (list) => {
    for (const ch of list) {
      channels.set(ch.id, ch);
      subs.set(client.subscribe(ch.id), ch);
    }
  });
  return subs;
}

function check() {
  // A first, short visit: one message, then leave (a client that comes and
  // goes mid-run).
  const first = connect();
  const firstSubs = subscribeAll(first.client, new Map());
  let left = false;
  first.client.on("message", () => {
    if (left) return;
    left = true;
    first.client.close();
    main();
  });
  first.client.on("error", (e) => fail(`first visit: ${e.message || e}`));
  void firstSubs;

  function main() {
    const channels = new Map();
    const { client } = connect();
    const subs = subscribeAll(client, channels);
    const images = new Map(); // timestamp_ns -> RawImage
    const cameraFrames = new Map(); // timestamp_ns -> frame JSON
    const summary = {
      images_checked: 0,
      camera_frames: 0,
      src_frames_checked: 0,
      gray_images: 0,
      operators: {},
      operator_messages: 0,
      logs: [],
      end: null,
      schemas: {},
    };
    const checkImage = (ts) => {
      const img = images.get(ts);
      const fr = cameraFrames.get(ts);
      if (!img || !fr) return;
      images.delete(ts);
      cameraFrames.delete(ts);
      const seq = fr.frame;
      const [h, w, c] = fr.shape;
      if (img.width !== w || img.height !== h || img.encoding !== "rgb8" || img.step !== w * 3)
        fail(`frame ${seq}: image ${img.width}x${img.height} ${img.encoding} step ${img.step}`);
      if (img.data.length !== h * w * c) fail(`frame ${seq}: ${img.data.length} bytes`);
      if (img.frameId !== "camera/image") fail(`frame_id ${img.frameId}`);
      if (img.sec !== fr.timestamp.sec || img.nsec !== fr.timestamp.nsec)
        fail(`frame ${seq}: image time ${img.sec}.${img.nsec}, frame ${fr.timestamp.sec}.${fr.timestamp.nsec}`);
      let min = 255;
      let max = 0;
      let sum = 0;
      const centre = discCentre(seq, h, w);
      for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
          for (let k = 0; k < 3; k++) {
            const got = img.data[(y * w + x) * 3 + k];
            const want = cameraPixel(centre, seq, h, w, x, y, k);
            if (want !== null && got !== want)
              fail(`frame ${seq} pixel (${x}, ${y}) channel ${k}: ${got}, the camera made ${want}`);
            min = Math.min(min, got);
            max = Math.max(max, got);
            sum += got;
          }
        }
      }
      if (fr.min !== min || fr.max !== max || !near(fr.mean, sum / (h * w * 3)))
        fail(`frame ${seq}: min/max/mean ${fr.min}/${fr.max}/${fr.mean}, pixels ${min}/${max}/${sum / (h * w * 3)}`);
      if (fr.element !== "uint8") fail(`camera element ${fr.element}`);
      summary.images_checked++;
    };
    client.on("message", (ev) => {
      const ch = subs.get(ev.subscriptionId);
      if (!ch) return;
      const data = Buffer.from(ev.data.buffer, ev.data.byteOffset, ev.data.byteLength);
      summary.schemas[ch.topic] = `${ch.encoding} ${ch.schemaName}`;
      if (ch.topic === "camera/image/image") {
        const img = rawImage(data);
        const ts = (BigInt(img.sec) * 1000000000n + BigInt(img.nsec)).toString();
        images.set(ts, img);
        checkImage(ts);
      } else if (ch.topic === "camera/image/frame") {
        const fr = JSON.parse(data.toString());
        summary.camera_frames++;
        const ts = (BigInt(fr.timestamp.sec) * 1000000000n + BigInt(fr.timestamp.nsec)).toString();
        cameraFrames.set(ts, fr);
        checkImage(ts);
      } else if (ch.topic === "gray/luma/image") {
        const img = rawImage(data);
        if (img.encoding !== "32FC1" || img.step !== img.width * 4 || img.data.length !== img.step * img.height)
          fail(`gray/luma image ${img.width}x${img.height} ${img.encoding} step ${img.step}`);
        summary.gray_images++;
      } else if (ch.topic === "src/v/frame") {
        const fr = JSON.parse(data.toString());
        const seq = fr.frame;
        const [rows, cols] = fr.shape;
        if (rows !== 1 + (seq % 16) || cols !== 64 || fr.element !== "uint32")
          fail(`src/v frame ${seq}: shape ${fr.shape} ${fr.element}`);
        let min = Infinity;
        let max = -Infinity;
        let sum = 0;
        for (let i = 0; i < rows * cols; i++) {
          const v = word(seq, i);
          min = Math.min(min, v);
          max = Math.max(max, v);
          sum += v;
        }
        if (fr.min !== min || fr.max !== max || !near(fr.mean, sum / (rows * cols)))
          fail(`src/v frame ${seq}: min/max/mean ${fr.min}/${fr.max}/${fr.mean}, words ${min}/${max}/${sum / (rows * cols)}`);
        summary.src_frames_checked++;
      } else if (ch.topic.startsWith("operators/")) {
        const op = JSON.parse(data.toString());
        summary.operators[op.operator] = op;
        summary.operator_messages++;
      } else if (ch.topic === "log") {
        const l = logMessage(data);
        if (summary.logs.length < 200) summary.logs.push(l);
      } else if (ch.topic === "run") {
        summary.end = JSON.parse(data.toString());
        process.stdout.write(JSON.stringify(summary) + "\n");
        client.close();
        process.exit(0);
      }
    });
    client.on("error", (e) => fail(`${e.message || e}`));
    client.on("close", () => {
      if (!summary.end) fail("closed before the end message");
    });
  }
}

// MODE `read` (the bench's clients, `cargo xtask bench chain viewer`):
// subscribes to every channel and reads every message until SECONDS
// passed or the server went, then prints `messages N bytes B`.
function read() {
  const { client } = connect();
  subscribeAll(client, new Map());
  let messages = 0;
  let bytes = 0;
  const done = () => {
    console.log(`messages ${messages} bytes ${bytes}`);
    process.exit(0);
  };
  client.on("message", (m) => {
    messages += 1;
    bytes += m.data.byteLength;
  });
  client.on("error", () => {});
  client.on("close", done);
  setTimeout(done, seconds * 1000);
}

function idle() {
  const { ws, client } = connect();
  const channels = new Map();
  const subs = subscribeAll(client, channels);
  const pause = () => ws._socket && ws._socket.pause();
  // IDLE_IMAGE_CHANNELS=N: stop reading once a message came from N image
  // channels (so it surely subscribed to them), and say so on stdout;
  // else 300 ms after connecting.
  const want = Number(process.env.IDLE_IMAGE_CHANNELS || 0);
  if (want > 0) {
    const images = new Set();
    let paused = false;
    client.on("message", (m) => {
      if (paused) return;
      const ch = subs.get(m.subscriptionId);
      if (ch && ch.schemaName === "foxglove.RawImage") images.add(ch.topic);
      if (images.size >= want) {
        paused = true;
        pause();
        console.log(`idle: stopped reading, subscribed to ${subs.size} channels, images from ${images.size}`);
      }
    });
  } else {
    setTimeout(pause, 300);
  }
  client.on("error", () => {});
  setTimeout(() => process.exit(0), seconds * 1000);
}

function garbage() {
  const until = Date.now() + seconds * 1000;
  const { ws } = connect();
  ws.on("error", () => {});
  ws.on("open", () => {
    const timer = setInterval(() => {
      if (Date.now() > until || ws.readyState !== WebSocket.OPEN) {
        clearInterval(timer);
        return;
      }
      const bytes = Buffer.alloc(64);
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
      ws.send(bytes);
      ws.send("{not json");
      ws.send(JSON.stringify({ op: "subscribe", subscriptions: [{ id: "x", channelId: -1 }] }));
      ws.send(JSON.stringify({ op: "unsubscribe", subscriptionIds: [12345] }));
    }, 20);
  });
  // Bytes that are no HTTP request at all.
  const raw = net.connect(Number(new URL(url).port), new URL(url).hostname, () => {
    const bytes = Buffer.alloc(4096);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
    raw.write(bytes);
  });
  raw.on("error", () => {});
  setTimeout(() => {
    raw.destroy();
    ws.terminate();
    process.exit(0);
  }, seconds * 1000);
}

if (mode === "check") check();
else if (mode === "read") read();
else if (mode === "idle") idle();
else if (mode === "garbage") garbage();
else fail(`unknown mode ${mode}`);
