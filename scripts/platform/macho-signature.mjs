// Checks the code signature of a 64-bit Mach-O file (no codesign on Linux):
// an LC_CODE_SIGNATURE whose CodeDirectory is ad-hoc (what Apple Silicon
// requires of every loaded binary, with no certificate) and whose page
// hashes match the file's bytes.
//
//   node scripts/platform/macho-signature.mjs FILE
//
// Prints one line ("ad-hoc signed: ...") and exits 0, or prints what is
// wrong and exits 1. Layout: Apple's cs_blobs.h (SuperBlob and
// CodeDirectory are big-endian; the Mach-O header is the file's order,
// little-endian on arm64 and x86_64).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const MH_MAGIC_64 = 0xfeedfacf;
const LC_CODE_SIGNATURE = 0x1d;
const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSSLOT_CODEDIRECTORY = 0;
const CS_ADHOC = 0x2;
const HASHES = { 1: ['sha1', 20], 2: ['sha256', 32], 3: ['sha256', 20] }; // 3: sha256 truncated

function check(file) {
  const buf = readFileSync(file);
  if (buf.length < 32 || buf.readUInt32LE(0) !== MH_MAGIC_64) return 'not a little-endian 64-bit Mach-O file';
  const ncmds = buf.readUInt32LE(16);
  let at = 32;
  let sig;
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(at);
    if (cmd === LC_CODE_SIGNATURE) sig = { off: buf.readUInt32LE(at + 8), size: buf.readUInt32LE(at + 12) };
    at += buf.readUInt32LE(at + 4);
  }
  if (!sig) return 'no LC_CODE_SIGNATURE: unsigned';
  if (sig.off + sig.size > buf.length) return 'the signature lies past the end of the file';
  const blob = buf.subarray(sig.off, sig.off + sig.size);
  if (blob.readUInt32BE(0) !== CSMAGIC_EMBEDDED_SIGNATURE) return 'the signature is no embedded-signature SuperBlob';
  let cd;
  for (let i = 0, count = blob.readUInt32BE(8); i < count; i++) {
    if (blob.readUInt32BE(12 + i * 8) === CSSLOT_CODEDIRECTORY) cd = blob.subarray(blob.readUInt32BE(16 + i * 8));
  }
  if (!cd || cd.readUInt32BE(0) !== CSMAGIC_CODEDIRECTORY) return 'the signature holds no CodeDirectory';
  const flags = cd.readUInt32BE(12);
  const hashOffset = cd.readUInt32BE(16);
  const identOffset = cd.readUInt32BE(20);
  const nCodeSlots = cd.readUInt32BE(28);
  const codeLimit = cd.readUInt32BE(32);
  const hashSize = cd[36];
  const hashType = cd[37];
  const pageSize = 2 ** cd[39];
  const ident = cd.toString('latin1', identOffset, cd.indexOf(0, identOffset));
  if ((flags & CS_ADHOC) === 0) return `CodeDirectory flags 0x${flags.toString(16)}: not ad-hoc`;
  const [algo, size] = HASHES[hashType] ?? [];
  if (!algo || size !== hashSize) return `unknown hash type ${hashType} (size ${hashSize})`;
  if (codeLimit !== sig.off) return `the signature covers ${codeLimit} bytes, the code ends at ${sig.off}`;
  if (nCodeSlots !== Math.ceil(codeLimit / pageSize)) return `${nCodeSlots} page hashes for ${codeLimit} bytes`;
  for (let i = 0; i < nCodeSlots; i++) {
    const page = buf.subarray(i * pageSize, Math.min((i + 1) * pageSize, codeLimit));
    const want = cd.subarray(hashOffset + i * hashSize, hashOffset + (i + 1) * hashSize);
    const got = createHash(algo).update(page).digest().subarray(0, hashSize);
    if (!got.equals(want)) return `page ${i} does not match its hash: the file changed after signing`;
  }
  return { ok: `ad-hoc signed: identifier ${ident}, ${nCodeSlots} pages of ${pageSize} bytes match their ${algo} hashes` };
}

const file = process.argv[2];
if (!file) {
  console.error('usage: node scripts/platform/macho-signature.mjs FILE');
  process.exit(2);
}
const r = check(file);
if (typeof r === 'string') {
  console.log(`${file}: ${r}`);
  process.exit(1);
}
console.log(r.ok);
