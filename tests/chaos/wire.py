"""Byte-level helpers of the chaos harness: dex's framed objects decoded by hand (no protobuf
package needed), and the MinIO bucket.

Frame (src/common/framing.h): 4-byte magic, 1-byte version, 4-byte little-endian payload
length, 4-byte CRC-32, then the protobuf payload. LeaseRecord and LogBatch fields are those of
proto/dex/records.proto.
"""

LEASE_FIELDS = {1: "node_id", 2: "epoch", 3: "holder", 4: "duration_ms", 5: "renewal_count",
                6: "released", 7: "write_id"}
BATCH_FIELDS = {1: "node_id", 2: "epoch", 3: "slot", 4: "writer", 5: "write_id"}


def unframe(body, magic):
    if body[:4] != magic:
        raise ValueError(f"bad magic {body[:4]!r}, expected {magic!r}")
    length = int.from_bytes(body[5:9], "little")
    payload = body[13:13 + length]
    if len(payload) != length:
        raise ValueError("truncated frame")
    return payload


def fields(payload):
    """Yields (field number, wire type, value) of a protobuf message: ints for varints, bytes
    for length-delimited fields."""
    i, n = 0, len(payload)

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= n:
                raise ValueError("truncated varint")
            b = payload[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    while i < n:
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, wire, varint()
        elif wire == 2:
            size = varint()
            yield field, wire, payload[i:i + size]
            i += size
        elif wire == 1:
            yield field, wire, payload[i:i + 8]
            i += 8
        elif wire == 5:
            yield field, wire, payload[i:i + 4]
            i += 4
        else:
            raise ValueError(f"unexpected wire type {wire}")


def decode_lease(body):
    out = {"epoch": 0, "renewal_count": 0, "released": False}
    for field, wire, value in fields(unframe(body, b"DXLS")):
        name = LEASE_FIELDS.get(field)
        if name is None:
            continue
        if wire == 2:
            value = value.decode()
        elif name == "released":
            value = bool(value)
        out[name] = value
    return out


def decode_batch_header(body):
    """The batch's epoch, slot, writer and write_id, and whether its first record is an
    EpochStart (LogRecord field 1)."""
    out = {"epoch": 0, "slot": 0, "records": 0, "epoch_start": False}
    for field, wire, value in fields(unframe(body, b"DXLB")):
        if field == 6:
            if out["records"] == 0:
                out["epoch_start"] = any(f == 1 for f, _, _ in fields(value))
            out["records"] += 1
            continue
        name = BATCH_FIELDS.get(field)
        if name is None:
            continue
        out[name] = value.decode() if wire == 2 else value
    return out


def create_bucket(endpoint, bucket, access, secret):
    """True once the bucket exists (MinIO answers); False while it does not answer yet."""
    import boto3
    import botocore.config
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                      aws_secret_access_key=secret, region_name="us-east-1",
                      config=botocore.config.Config(connect_timeout=2, read_timeout=5,
                                                    retries={"max_attempts": 1}))
    try:
        s3.create_bucket(Bucket=bucket)
        return True
    except s3.exceptions.BucketAlreadyOwnedByYou:
        return True
    except Exception:
        return False
