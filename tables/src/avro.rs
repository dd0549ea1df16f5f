//! The few parts of Avro that Iceberg's manifests and manifest lists need: binary
//! encoding of values and the object container file (header with schema and metadata,
//! one block, sync marker), uncompressed. The schema is written as given, so Iceberg's
//! `field-id` attributes reach readers untouched.

/// An Avro value, encoded as its schema says; the caller keeps the two in step.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int(i32),
    Long(i64),
    String(String),
    Bytes(Vec<u8>),
    /// The index of the branch in the union's schema, and the value.
    Union(u32, Box<Value>),
    Array(Vec<Value>),
    /// The fields in schema order.
    Record(Vec<Value>),
}

impl Value {
    /// `null` in a `["null", T]` union.
    pub fn none() -> Value {
        Value::Union(0, Box::new(Value::Null))
    }

    /// A value in a `["null", T]` union.
    pub fn some(value: Value) -> Value {
        Value::Union(1, Box::new(value))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => {}
            Value::Boolean(b) => out.push(u8::from(*b)),
            Value::Int(i) => encode_long(i64::from(*i), out),
            Value::Long(l) => encode_long(*l, out),
            Value::String(s) => encode_bytes(s.as_bytes(), out),
            Value::Bytes(b) => encode_bytes(b, out),
            Value::Union(branch, value) => {
                encode_long(i64::from(*branch), out);
                value.encode(out);
            }
            Value::Array(items) => {
                if !items.is_empty() {
                    encode_long(items.len() as i64, out);
                    items.iter().for_each(|item| item.encode(out));
                }
                encode_long(0, out);
            }
            Value::Record(fields) => fields.iter().for_each(|field| field.encode(out)),
        }
    }
}

/// A long as Avro writes it: zig-zag, then 7 bits a byte, low bits first.
fn encode_long(value: i64, out: &mut Vec<u8>) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    encode_long(bytes.len() as i64, out);
    out.extend_from_slice(bytes);
}

/// An object container file holding `records` of `schema` (Avro schema JSON), with
/// `metadata` beside the schema in the header. The sync marker is taken from `sync`, so
/// the same input makes the same bytes.
pub fn container(schema: &str, metadata: &[(&str, String)], records: &[Value], sync: [u8; 16]) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    let mut entries = vec![("avro.schema", schema.as_bytes()), ("avro.codec", b"null".as_slice())];
    entries.extend(metadata.iter().map(|(key, value)| (*key, value.as_bytes())));
    encode_long(entries.len() as i64, &mut out);
    for (key, value) in entries {
        encode_bytes(key.as_bytes(), &mut out);
        encode_bytes(value, &mut out);
    }
    encode_long(0, &mut out);
    out.extend_from_slice(&sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        records.iter().for_each(|record| record.encode(&mut block));
        encode_long(records.len() as i64, &mut out);
        encode_bytes(&block, &mut out);
        out.extend_from_slice(&sync);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(value: Value) -> Vec<u8> {
        let mut out = Vec::new();
        value.encode(&mut out);
        out
    }

    /// The examples of Avro's specification: zig-zag longs, length-prefixed strings,
    /// arrays as counted blocks ending in 0, unions as branch then value.
    #[test]
    fn values_encode_as_the_avro_specification_shows() {
        assert_eq!(encoded(Value::Long(0)), [0x00]);
        assert_eq!(encoded(Value::Long(-1)), [0x01]);
        assert_eq!(encoded(Value::Long(1)), [0x02]);
        assert_eq!(encoded(Value::Long(-64)), [0x7f]);
        assert_eq!(encoded(Value::Long(64)), [0x80, 0x01]);
        assert_eq!(encoded(Value::Int(i32::MIN)), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(encoded(Value::String("foo".into())), [0x06, b'f', b'o', b'o']);
        assert_eq!(encoded(Value::Array(vec![Value::Long(3), Value::Long(27)])), [0x04, 0x06, 0x36, 0x00]);
        assert_eq!(encoded(Value::Array(vec![])), [0x00]);
        assert_eq!(encoded(Value::none()), [0x00]);
        assert_eq!(encoded(Value::some(Value::Boolean(true))), [0x02, 0x01]);
        assert_eq!(encoded(Value::Record(vec![Value::Int(1), Value::Bytes(vec![9])])), [0x02, 0x02, 0x09]);
    }

    /// Magic, header map (schema, codec, then the caller's entries), sync marker, one
    /// block of the records closed by the same marker.
    #[test]
    fn a_container_holds_header_then_one_block() {
        let sync = [7u8; 16];
        let file = container("\"long\"", &[("k", "v".into())], &[Value::Long(1), Value::Long(2)], sync);
        let mut expected = b"Obj\x01".to_vec();
        expected.push(0x06); // three entries
        for (key, value) in [("avro.schema", "\"long\""), ("avro.codec", "null"), ("k", "v")] {
            expected.push((key.len() * 2) as u8);
            expected.extend_from_slice(key.as_bytes());
            expected.push((value.len() * 2) as u8);
            expected.extend_from_slice(value.as_bytes());
        }
        expected.push(0x00);
        expected.extend_from_slice(&sync);
        expected.extend_from_slice(&[0x04, 0x04, 0x02, 0x04]); // two records, two bytes: 1, 2
        expected.extend_from_slice(&sync);
        assert_eq!(file, expected);
    }
}
