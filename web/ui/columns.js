// Table columns per resource, close to what kubectl get prints. A column is
//   {id, title, width, value(obj) → sortable value, text?(value, now) → string,
//    tone?(obj) → 'ok' | 'warn' | 'bad' | 'host', align?: 'end', mono?: true,
//    key?: the server's sort key (docs/query.md) when it is not id}
// value is computed once per object version; text runs at render time (ages
// keep ticking).

import {duration} from './dom.js';

const namespace = {id: 'namespace', title: 'Namespace', width: 'minmax(7rem, 0.8fr)', value: (o) => o.metadata?.namespace ?? ''};
const name = {id: 'name', title: 'Name', width: 'minmax(12rem, 2fr)', value: (o) => o.metadata?.name ?? '', mono: true};
const age = {
  id: 'age', title: 'Age', width: '4.5rem', align: 'end',
  value: (o) => Date.parse(o.metadata?.creationTimestamp ?? '') || 0,
  text: (t, now) => (t ? duration(now - t) : ''),
  // Newest first reads better when sorting by age ascending.
  compare: (a, b) => b - a,
};
const num = (id, title, f) => ({id, title, width: '5.5rem', align: 'end', value: (o) => f(o) ?? 0});

function podStatus(o) {
  if (o.metadata?.deletionTimestamp) return 'Terminating';
  for (const cs of [...(o.status?.initContainerStatuses ?? []), ...(o.status?.containerStatuses ?? [])]) {
    const reason = cs.state?.waiting?.reason || (cs.state?.terminated && o.status?.phase !== 'Succeeded' && cs.state.terminated.reason);
    if (reason && reason !== 'PodInitializing' && reason !== 'Completed') return reason;
  }
  return o.status?.reason || o.status?.phase || 'Unknown';
}

function podTone(o) {
  const s = podStatus(o);
  if (s === 'Running' || s === 'Succeeded') return 'ok';
  if (s === 'Pending' || s === 'Terminating' || s === 'ContainerCreating') return 'warn';
  return 'bad';
}

function podReady(o) {
  const cs = o.status?.containerStatuses ?? [];
  const total = o.spec?.containers?.length ?? cs.length;
  return [cs.filter((c) => c.ready).length, total];
}

export function podIPs(o) {
  const ips = (o.status?.podIPs ?? []).map((p) => p.ip);
  if (ips.length === 0 && o.status?.podIP) ips.push(o.status.podIP);
  return ips;
}

const pods = [
  namespace, name,
  {id: 'status', title: 'Status', width: 'minmax(7rem, 0.9fr)', value: podStatus, tone: podTone},
  {
    id: 'ready', title: 'Ready', width: '4.5rem', align: 'end',
    value: (o) => podReady(o).join('/'),
    tone: (o) => {
      const [r, t] = podReady(o);
      return r < t && o.status?.phase === 'Running' ? 'warn' : undefined;
    },
  },
  num('restarts', 'Restarts', (o) => (o.status?.containerStatuses ?? []).reduce((n, c) => n + (c.restartCount ?? 0), 0)),
  {
    id: 'ip', title: 'IP', width: 'minmax(9rem, 1.2fr)', mono: true, value: (o) => podIPs(o).join(', '),
    tone: (o) => (o.spec?.hostNetwork ? 'host' : undefined),
  },
  {id: 'node', title: 'Node', width: 'minmax(6rem, 0.8fr)', value: (o) => o.spec?.nodeName ?? ''},
  age,
];

function nodeReady(o) {
  const c = (o.status?.conditions ?? []).find((x) => x.type === 'Ready');
  const s = c?.status === 'True' ? 'Ready' : c?.status === 'False' ? 'NotReady' : 'Unknown';
  return o.spec?.unschedulable ? `${s},SchedulingDisabled` : s;
}

const nodes = [
  name,
  {id: 'status', title: 'Status', width: 'minmax(7rem, 1fr)', value: nodeReady,
    tone: (o) => (nodeReady(o) === 'Ready' ? 'ok' : nodeReady(o).startsWith('Ready') ? 'warn' : 'bad')},
  {id: 'roles', title: 'Roles', width: 'minmax(6rem, 0.8fr)', value: (o) => Object.keys(o.metadata?.labels ?? {})
    .filter((k) => k.startsWith('node-role.kubernetes.io/')).map((k) => k.slice(24)).join(',') || '<none>'},
  {id: 'ip', key: 'internal-ip', title: 'Internal IP', width: 'minmax(9rem, 1fr)', mono: true, value: (o) => (o.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP').map((a) => a.address).join(', ')},
  {id: 'version', title: 'Version', width: 'minmax(6rem, 0.7fr)', value: (o) => o.status?.nodeInfo?.kubeletVersion ?? ''},
  age,
];

const replicasTone = (ready, want) => (o) => ((ready(o) ?? 0) < (want(o) ?? 1) ? 'warn' : 'ok');

const deployments = [
  namespace, name,
  {id: 'ready', title: 'Ready', width: '5rem', align: 'end',
    value: (o) => `${o.status?.readyReplicas ?? 0}/${o.spec?.replicas ?? 1}`,
    tone: replicasTone((o) => o.status?.readyReplicas, (o) => o.spec?.replicas)},
  {...num('updated', 'Up-to-date', (o) => o.status?.updatedReplicas), key: 'up-to-date'},
  num('available', 'Available', (o) => o.status?.availableReplicas),
  age,
];

const replicasets = [
  namespace, name,
  num('desired', 'Desired', (o) => o.spec?.replicas),
  num('current', 'Current', (o) => o.status?.replicas),
  {...num('ready', 'Ready', (o) => o.status?.readyReplicas),
    tone: replicasTone((o) => o.status?.readyReplicas, (o) => o.spec?.replicas)},
  age,
];

const services = [
  namespace, name,
  {id: 'type', title: 'Type', width: '7rem', value: (o) => o.spec?.type ?? 'ClusterIP'},
  {id: 'clusterIP', key: 'cluster-ip', title: 'Cluster IP', width: 'minmax(8rem, 1fr)', mono: true,
    value: (o) => (o.spec?.clusterIPs ?? [o.spec?.clusterIP]).filter(Boolean).join(', ')},
  {id: 'ports', key: 'port(s)', title: 'Ports', width: 'minmax(7rem, 1fr)', value: (o) => (o.spec?.ports ?? [])
    .map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol ?? 'TCP'}`).join(',')},
  age,
];

const namespaces = [
  name,
  {id: 'status', title: 'Status', width: 'minmax(6rem, 1fr)', value: (o) => o.status?.phase ?? '',
    tone: (o) => (o.status?.phase === 'Active' ? 'ok' : 'warn')},
  age,
];

const known = {
  'pods': pods,
  'nodes': nodes,
  'services': services,
  'namespaces': namespaces,
  'deployments.apps': deployments,
  'replicasets.apps': replicasets,
};

// podFields are the paths the pod columns read: a question view asks for
// only these (fields=), so that its rows are small.
export const podFields = ['metadata.creationTimestamp', 'metadata.deletionTimestamp', 'spec.nodeName', 'spec.hostNetwork',
  'status.phase', 'status.reason', 'status.podIP', 'status.podIPs', 'status.containerStatuses', 'status.initContainerStatuses'].join(',');

// columnsFor returns the columns for a resource as /api/v1/resources
// describes it; any other resource gets namespace, name and age.
export function columnsFor(resource) {
  const id = resource.group ? `${resource.plural}.${resource.group}` : resource.plural;
  return known[id] ?? (resource.namespaced ? [namespace, name, age] : [name, age]);
}
