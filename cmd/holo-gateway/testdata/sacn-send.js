// sacn-send: sends one sACN universe with the npm package "sacn" (a
// sender no one here wrote) to a unicast address and port, for the DMX
// tests. Argument: JSON {host, port, universe, priority, name, cid (32 hex digits), payload:
// {"1": 255, ...} (raw 0-255 values), hz, seconds}. It sends at hz for
// seconds, then closes without a stream-terminated packet (a source that
// stops), printing "sent N" and "stopped".
const { Sender } = require('sacn');

const o = JSON.parse(process.argv[2]);
const s = new Sender({
  universe: o.universe,
  port: o.port,
  useUnicastDestination: o.host,
  // Each sender its own CID (the package's default is one fixed CID for
  // every sender, and E1.31 tells sources apart by CID).
  defaultPacketOptions: { sourceName: o.name, priority: o.priority, useRawDmxValues: true, cid: Buffer.from(o.cid, 'hex') },
});
let n = 0;
const tick = async () => {
  await s.send({ payload: o.payload });
  n++;
};
const timer = setInterval(() => { tick().catch((e) => { console.error(e); process.exit(1); }); }, 1000 / o.hz);
tick();
setTimeout(() => {
  clearInterval(timer);
  s.close();
  console.log(`sent ${n}`);
  console.log('stopped');
}, o.seconds * 1000);
