/**
 * A minimal protobuf wire-format writer, so tests can send bodies as client-go's typed clients
 * do, field by field from the published k8s.io/api field numbers, independently of the
 * emulator's own message definitions.
 */
const varint = (value: number): Buffer => {
  const out: number[] = [];
  let v = BigInt(value);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return Buffer.from(out);
};
const key = (no: number, wire: 0 | 2) => varint((no << 3) | wire);

export const pb = {
  int: (no: number, v: number) => Buffer.concat([key(no, 0), varint(v)]),
  bool: (no: number, v: boolean) => Buffer.concat([key(no, 0), varint(v ? 1 : 0)]),
  bytes: (no: number, v: Buffer) => Buffer.concat([key(no, 2), varint(v.length), v]),
  string: (no: number, v: string) => pb.bytes(no, Buffer.from(v)),
  message: (no: number, ...fields: Buffer[]) => pb.bytes(no, Buffer.concat(fields)),
};

/** The `k8s\0` magic and the runtime.Unknown envelope (typeMeta 1, raw 2, contentType 4). */
export const k8sProtobuf = (apiVersion: string, kind: string, object: Buffer[]): Buffer =>
  Buffer.concat([
    Buffer.from('k8s\0'),
    pb.message(1, pb.string(1, apiVersion), pb.string(2, kind)),
    pb.bytes(2, Buffer.concat(object)),
    pb.string(3, ''),
    pb.string(4, ''),
  ]);
