// An independent JavaScript implementation of the full-row codec
// (storage-layout.md §6.1): null bitmap first, then every non-null value in
// column order, untagged, little-endian, fixed width.

const textEncoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true });

const BLOB_REF_KEYS = ['blobId', 'byteLength', 'mediaType', 'name'];

/** Canonical BlobRef JSON text: known keys only, in the fixed order. */
export function blobRefJson(ref) {
  const out = {};
  for (const key of BLOB_REF_KEYS) if (ref[key] !== undefined) out[key] = ref[key];
  return JSON.stringify(out);
}

function u32(n) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}

function lengthPrefixed(bytes) {
  return [u32(bytes.length), bytes];
}

/**
 * Encode one row.
 * @param {{name:string,type:string,nullable:boolean}[]} columns
 * @param {object|any[]} values by column name, or positional. `undefined` is NULL.
 *   `json` takes raw text (a string) or any value (JSON.stringify is applied);
 *   `blob_ref` takes raw text or an object (canonicalized); `bytes`/`crdt` take a Uint8Array.
 * @param {{allowInvalid?: boolean}} [opts] skip the value checks (to build bad payloads)
 */
export function encodeRow(columns, values, opts = {}) {
  const n = columns.length;
  const bitmap = new Uint8Array(Math.ceil(n / 8));
  const parts = [bitmap];
  columns.forEach((column, i) => {
    const v = Array.isArray(values) ? values[i] : values[column.name];
    if (v === null || v === undefined) {
      if (!column.nullable && !opts.allowInvalid) {
        throw new Error(`encodeRow: column ${column.name} is not nullable`);
      }
      bitmap[i >> 3] |= 1 << (i & 7);
      return;
    }
    switch (column.type) {
      case 'string':
        parts.push(...lengthPrefixed(textEncoder.encode(String(v))));
        break;
      case 'json': {
        const text = typeof v === 'string' ? v : JSON.stringify(v);
        parts.push(...lengthPrefixed(textEncoder.encode(text)));
        break;
      }
      case 'blob_ref': {
        const text = typeof v === 'string' ? v : blobRefJson(v);
        parts.push(...lengthPrefixed(textEncoder.encode(text)));
        break;
      }
      case 'integer': {
        if (!opts.allowInvalid && !Number.isSafeInteger(v)) {
          throw new Error(`encodeRow: ${column.name} is not a safe integer`);
        }
        const b = new Uint8Array(8);
        new DataView(b.buffer).setBigInt64(0, BigInt(v), true);
        parts.push(b);
        break;
      }
      case 'float': {
        const b = new Uint8Array(8);
        new DataView(b.buffer).setFloat64(0, v, true);
        parts.push(b);
        break;
      }
      case 'boolean':
        parts.push(Uint8Array.of(typeof v === 'number' ? v : v ? 1 : 0));
        break;
      case 'bytes':
      case 'crdt':
        parts.push(...lengthPrefixed(v));
        break;
      default:
        throw new Error(`encodeRow: unsupported column type ${column.type}`);
    }
  });
  return concatBytes(parts);
}

export function concatBytes(parts) {
  const total = parts.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Strict decoder mirroring the rules of §6.1; returns an object by column name. */
export function decodeRow(columns, bytes) {
  const n = columns.length;
  const bitmapLen = Math.ceil(n / 8);
  if (bytes.length < bitmapLen) throw new Error('decodeRow: truncated bitmap');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let bit = n; bit < bitmapLen * 8; bit++) {
    if (bytes[bit >> 3] & (1 << (bit & 7))) throw new Error('decodeRow: padding bit set');
  }
  let at = bitmapLen;
  const need = (k) => {
    if (at + k > bytes.length) throw new Error('decodeRow: truncated value');
  };
  const text = () => {
    need(4);
    const len = view.getUint32(at, true);
    at += 4;
    need(len);
    const s = strictDecoder.decode(bytes.subarray(at, at + len));
    at += len;
    return s;
  };
  const out = {};
  columns.forEach((column, i) => {
    const isNull = (bytes[i >> 3] & (1 << (i & 7))) !== 0;
    if (isNull) {
      if (!column.nullable) throw new Error(`decodeRow: null in non-nullable ${column.name}`);
      out[column.name] = null;
      return;
    }
    switch (column.type) {
      case 'string':
      case 'blob_ref':
        out[column.name] = text();
        break;
      case 'json': {
        const s = text();
        JSON.parse(s);
        out[column.name] = s;
        break;
      }
      case 'integer': {
        need(8);
        const v = view.getBigInt64(at, true);
        at += 8;
        if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) {
          throw new Error('decodeRow: integer out of range');
        }
        out[column.name] = Number(v);
        break;
      }
      case 'float':
        need(8);
        out[column.name] = view.getFloat64(at, true);
        at += 8;
        break;
      case 'boolean': {
        need(1);
        const b = bytes[at++];
        if (b > 1) throw new Error('decodeRow: boolean out of range');
        out[column.name] = b === 1;
        break;
      }
      case 'bytes':
      case 'crdt': {
        need(4);
        const len = view.getUint32(at, true);
        at += 4;
        need(len);
        out[column.name] = bytes.slice(at, at + len);
        at += len;
        break;
      }
      default:
        throw new Error(`decodeRow: unsupported column type ${column.type}`);
    }
  });
  if (at !== bytes.length) throw new Error('decodeRow: trailing bytes');
  return out;
}

export function hex(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

export function fromHex(s) {
  return new Uint8Array(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
}

/** Unsigned LEB128 (ordinal, version) pairs, as stored in _sync_column_versions. */
export function encodeColumnVersions(pairs) {
  const out = [];
  const leb = (n) => {
    do {
      let byte = n & 0x7f;
      n = Math.floor(n / 128);
      if (n > 0) byte |= 0x80;
      out.push(byte);
    } while (n > 0);
  };
  for (const [ordinal, version] of pairs) {
    leb(ordinal);
    leb(version);
  }
  return Uint8Array.from(out);
}
