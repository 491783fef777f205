// renderJSON returns a DocumentFragment of pretty-printed JSON with
// highlighting spans, for a <pre>. Everything is text nodes: nothing in the
// object is ever interpreted as markup. Very large objects are printed
// without highlighting, which stays fast.

const HIGHLIGHT_LIMIT = 300_000; // characters

export function renderJSON(value) {
  const frag = document.createDocumentFragment();
  const text = JSON.stringify(value, null, 2) ?? 'undefined';
  if (text.length > HIGHLIGHT_LIMIT) {
    frag.append(text);
    return frag;
  }
  const out = new Writer(frag);
  write(out, value, 0);
  out.flush();
  return frag;
}

// Writer batches plain text between highlighted tokens into single nodes.
class Writer {
  constructor(frag) {
    this.frag = frag;
    this.buf = '';
  }
  text(s) {
    this.buf += s;
  }
  token(cls, s) {
    this.flush();
    const span = document.createElement('span');
    span.className = cls;
    span.textContent = s;
    this.frag.append(span);
  }
  flush() {
    if (this.buf) this.frag.append(this.buf);
    this.buf = '';
  }
}

function write(out, v, depth) {
  const pad = '  '.repeat(depth + 1);
  const end = '  '.repeat(depth);
  if (Array.isArray(v)) {
    if (v.length === 0) return out.text('[]');
    out.text('[\n');
    v.forEach((item, i) => {
      out.text(pad);
      write(out, item, depth + 1);
      out.text(i < v.length - 1 ? ',\n' : '\n');
    });
    out.text(`${end}]`);
  } else if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 0) return out.text('{}');
    out.text('{\n');
    keys.forEach((k, i) => {
      out.text(pad);
      out.token('j-key', JSON.stringify(k));
      out.text(': ');
      write(out, v[k], depth + 1);
      out.text(i < keys.length - 1 ? ',\n' : '\n');
    });
    out.text(`${end}}`);
  } else if (typeof v === 'string') {
    out.token('j-str', JSON.stringify(v));
  } else if (typeof v === 'number') {
    out.token('j-num', String(v));
  } else if (typeof v === 'boolean') {
    out.token('j-bool', String(v));
  } else {
    out.token('j-null', 'null');
  }
}
