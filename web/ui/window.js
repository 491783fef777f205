// Live windows (docs/streams.md, "Live windows"): the client side of a
// window over the multiplexed stream. The server sends the window's rows
// (WINDOW), then what changed inside it as row operations
// (WINDOW_CHANGES); applyOps keeps the rows held equal to rows offset …
// offset+limit-1 of the current answer.

// applyOps applies ops, in order, to rows (changed in place) and returns
// rows. Each position is an index into the array as it is when its op
// applies. An op that does not fit the rows held (a position outside
// them, an unknown op) throws: a client out of step must ask for the
// window again rather than show rows that are wrong.
export function applyOps(rows, ops) {
  for (const op of ops ?? []) {
    switch (op.op) {
      case 'remove':
        at(op.at, rows.length - 1);
        rows.splice(op.at, 1);
        break;
      case 'insert':
        at(op.at, rows.length);
        rows.splice(op.at, 0, op.row);
        break;
      case 'update':
        at(op.at, rows.length - 1);
        rows[op.at] = op.row;
        break;
      case 'move':
        at(op.from, rows.length - 1);
        rows.splice(op.from, 1);
        at(op.to, rows.length);
        rows.splice(op.to, 0, op.row);
        break;
      default:
        throw new Error(`unknown window op ${JSON.stringify(op.op)}`);
    }
  }
  return rows;
}

function at(i, last) {
  if (!Number.isInteger(i) || i < 0 || i > last) throw new Error(`window op position ${i} outside 0…${last}`);
}

// windowMessage is the window op for a query: resource and the optional
// fields of docs/streams.md, those without a value left out.
export function windowMessage(id, q, resume) {
  const msg = {op: 'window', id, resource: q.resource};
  for (const k of ['namespace', 'labelSelector', 'sort', 'fields', 'groupBy']) if (q[k]) msg[k] = q[k];
  if (q.filter?.length) msg.filter = q.filter;
  msg.offset = q.offset ?? 0;
  msg.limit = q.limit ?? 100;
  if (resume) msg.resume = resume;
  return msg;
}

// unsupported reports whether an ERROR answering a window op says the
// server has no live windows (an older kubeindex), rather than that the
// question is bad.
export function unsupported(message, code) {
  return code === 400 && /unknown field|op must be/.test(message ?? '');
}
