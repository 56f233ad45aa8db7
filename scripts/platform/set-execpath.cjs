// Preloaded (node --require) by the emulated-Node wrappers that
// scripts/test-targets.sh writes. Under qemu-user, process.execPath is an
// arm64 ELF the host kernel cannot run (no binfmt_misc is assumed), and the
// musl Node must be started through its loader: either way a child spawned
// with process.execPath (node --test's workers, the crash tests' children)
// must go through the wrapper instead, which SYNCULAR_NODE_WRAPPER names.
'use strict';
if (process.env.SYNCULAR_NODE_WRAPPER) process.execPath = process.env.SYNCULAR_NODE_WRAPPER;
