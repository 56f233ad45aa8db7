// Deliberate mistakes a host could make; each marked line must be a type
// error, so this file must NOT compile. __test__/types.test.mjs checks that
// tsc reports an error on every line marked `EXPECT-ERROR`, and no others.
import { NativeStorage } from 'syncular-native-storage';

interface HostExpectingUndefinedFloor {
  // The contract answers `null` here; a host typed for `undefined` must be told.
  getActiveClientCursorFloor(partition: string, cutoffMs: number): Promise<number | undefined>;
}

interface HostExpectingNullRow {
  // Absent rows are `undefined`, never `null`.
  getRow(partition: string, table: string, rowId: string): Promise<{ readonly rowId: string } | null>;
}

export const a: HostExpectingUndefinedFloor = new NativeStorage(); // EXPECT-ERROR
export const b: HostExpectingNullRow = new NativeStorage(); // EXPECT-ERROR
export const c = new NativeStorage({ synchronous: 'FULL' }); // EXPECT-ERROR
export const d = new NativeStorage({ url: undefined, queryTimeoutMs: '10s' }); // EXPECT-ERROR
export const e = new NativeStorage({ logger: { warn(message: string) { void message; } } }); // EXPECT-ERROR
// storage.db binds SqliteValues only: `undefined` is refused at run time too.
export const f = new NativeStorage().db.run('INSERT INTO t VALUES (?)', [undefined]); // EXPECT-ERROR
