// The command line the alternating benches share (alternate.mjs,
// pg-share.mjs): --server PATH, --figure F, --rounds N, --module PATH
// (repeated), and the boolean flags a bench names; checked, with paths
// resolved.
import { resolve } from 'node:path';

/**
 * Parses process.argv for the bench `name`, whose figures are `figures`
 * (the first the default unless `figure` says), `rounds` by default, and
 * `flags` (e.g. ['--floor']). Answers { serverPath, modules, figure,
 * rounds, flags: { floor: true, … } }.
 */
export function benchArgs(name, { figures, figure = figures[0], rounds, flags = [] }) {
  const args = process.argv.slice(2);
  const out = { serverPath: undefined, modules: [], figure, rounds, flags: {} };
  for (const f of flags) out.flags[f.slice(2)] = false;
  for (let i = 0; i < args.length; i++) {
    const value = () => {
      if (i + 1 >= args.length) throw new Error(`${args[i]} needs a value`);
      return args[++i];
    };
    if (args[i] === '--module') out.modules.push(resolve(value()));
    else if (args[i] === '--server') out.serverPath = resolve(value());
    else if (args[i] === '--figure') out.figure = value();
    else if (args[i] === '--rounds') out.rounds = Number(value());
    else if (flags.includes(args[i])) out.flags[args[i].slice(2)] = true;
    else throw new Error(`unknown option ${args[i]}`);
  }
  if (!out.serverPath || out.modules.length === 0) {
    throw new Error(`usage: ${name} --server PATH [--figure ${figures.join('|')}] [--rounds N] ${flags.map((f) => `[${f}] `).join('')}--module PATH...`);
  }
  if (!figures.includes(out.figure)) throw new Error(`--figure: one of ${figures.join(', ')}, not ${out.figure}`);
  if (!Number.isSafeInteger(out.rounds) || out.rounds < 1) throw new Error('--rounds must be a positive integer');
  return out;
}
