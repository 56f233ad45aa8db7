'use strict';
// Loads the compiled addon. `npm install` builds it into native/ from source.
const path = require('node:path');

const file = path.join(__dirname, '..', 'native', 'syncular-native-storage.node');
let binding;
try {
  binding = require(file);
} catch (err) {
  const hint = new Error(
    `syncular-native-storage: cannot load the native addon at ${file}; run \`npm install\` (it builds the addon with cargo): ${err.message}`,
  );
  hint.code = 'ERR_SYNCULAR_ADDON_MISSING';
  hint.cause = err;
  throw hint;
}

module.exports = binding;
