'use strict';
// The storage members outside the host's request path, by area, each
// module a function of `inside` (what storage.js lends them of a
// storage's private state) answering plain methods. storage.js installs
// them on NativeStorage's prototype, where its constructor wraps every
// member alike (guard.js): the same argument checks, counters and close
// gate as the members written in the class.

const groups = [require('./checkpoints'), require('./cursors'), require('./reactions'), require('./admin'), require('./operations')];

/** Defines every group's members on `proto` as class methods are: writable, configurable, not enumerable. */
function installMembers(proto, inside) {
  for (const group of groups) {
    for (const [name, fn] of Object.entries(group(inside))) {
      if (Object.prototype.hasOwnProperty.call(proto, name)) throw new Error(`members: ${name} is defined twice`);
      Object.defineProperty(proto, name, { value: fn, writable: true, configurable: true, enumerable: false });
    }
  }
}

module.exports = { installMembers };
