// pods.mjs drives the official Kubernetes JavaScript client
// (@kubernetes/client-node, at the version package-lock.json pins),
// unchanged, against the server of a kubeconfig: the e2e test
// TestJSClientOverTLS runs it against kubeindex's /k8s over HTTPS with
// verification on.
//
//   node pods.mjs KUBECONFIG
//
// It writes JSON lines to stdout: {"list": …} (every pod, from
// listPodForAllNamespaces), {"get": …} (the first of them, read again with
// readNamespacedPod), then {"synced": …} once an informer on pods
// (makeInformer: list then watch) has listed, then one line per event it
// hands on, and {"cache": …} for each line "dump" read on stdin. It exits
// when stdin closes, and with status 1 and the error on stderr when a
// request fails (a server whose certificate the kubeconfig's CA did not
// sign among them).
import * as k8s from '@kubernetes/client-node';
import * as readline from 'node:readline';

const path = process.argv[2];
if (!path) {
  console.error('usage: node pods.mjs KUBECONFIG');
  process.exit(2);
}

// pod is what the test compares of a pod.
const pod = (p) => ({
  namespace: p.metadata.namespace,
  name: p.metadata.name,
  uid: p.metadata.uid,
  resourceVersion: p.metadata.resourceVersion,
  labels: p.metadata.labels ?? {},
});
const byName = (a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`);
const out = (line) => process.stdout.write(JSON.stringify(line) + '\n');

// fail reports a failed request with what node says of it: for TLS its
// code (UNABLE_TO_VERIFY_LEAF_SIGNATURE, …) comes in err.code or err.cause.
function fail(what, err) {
  const codes = [err?.code, err?.cause?.code].filter(Boolean).join(' ');
  console.error(`pods.mjs: ${what}: ${err?.message ?? err}${codes ? ` (${codes})` : ''}`);
  process.exit(1);
}

const kc = new k8s.KubeConfig();
kc.loadFromFile(path);
const core = kc.makeApiClient(k8s.CoreV1Api);

let list;
try {
  list = await core.listPodForAllNamespaces();
} catch (err) {
  fail('listPodForAllNamespaces', err);
}
out({ list: list.items.map(pod).sort(byName), resourceVersion: list.metadata.resourceVersion });
if (list.items.length > 0) {
  const first = list.items[0].metadata;
  try {
    const got = await core.readNamespacedPod({ name: first.name, namespace: first.namespace });
    out({ get: pod(got), kind: got.kind, apiVersion: got.apiVersion, containers: got.spec.containers.length });
  } catch (err) {
    fail(`readNamespacedPod ${first.namespace}/${first.name}`, err);
  }
}

const informer = k8s.makeInformer(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
let synced = false;
let stopping = false;
for (const verb of [k8s.ADD, k8s.UPDATE, k8s.DELETE]) {
  informer.on(verb, (p) => {
    if (synced) out({ event: verb, pod: pod(p) });
  });
}
informer.on(k8s.ERROR, (err) => {
  // The informer does not retry after an error: say so, and end.
  if (!stopping) fail('informer', err);
});
try {
  await informer.start();
} catch (err) {
  fail('informer start', err);
}
synced = true;
out({ synced: informer.list().length, resourceVersion: informer.latestResourceVersion() });

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (l) => {
  if (l.trim() === 'dump') {
    out({ cache: informer.list().map(pod).sort(byName), resourceVersion: informer.latestResourceVersion() });
  } else {
    console.error(`pods.mjs: unknown command ${JSON.stringify(l)} (want dump)`);
  }
});
rl.on('close', async () => {
  stopping = true;
  await informer.stop();
  process.exit(0);
});
