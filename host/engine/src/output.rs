//! Readings as text: CSV (`point,ts_ms,value`) or JSON lines
//! (`{"point":..,"ts_ms":..,"value":..}`). Written with ryu/itoa into a
//! reused buffer: formatting is the costly part of generating, not the model.

use std::io::Write;

pub struct ReadingWriter<W: Write> {
    out: W,
    format: Format,
    buf: Vec<u8>,
    ryu: ryu::Buffer,
    itoa: itoa::Buffer,
}

impl<W: Write> ReadingWriter<W> {
    pub fn new(out: W, format: Format) -> std::io::Result<Self> {
        let mut w = ReadingWriter {
            out,
            format,
            buf: Vec::with_capacity(1 << 20),
            ryu: ryu::Buffer::new(),
            itoa: itoa::Buffer::new(),
        };
        if format == Format::Csv {
            w.buf.extend_from_slice(b"point,ts_ms,value\n");
        }
        Ok(w)
    }

    /// One instant: `points[i]` has `values[i]` at `ts_ms`.
    pub fn write_instant(&mut self, points: &[String], ts_ms: i64, values: &[f64]) -> std::io::Result<()> {
        let ts = self.itoa.format(ts_ms).to_owned();
        for (p, v) in points.iter().zip(values) {
            let value = if v.is_finite() { self.ryu.format_finite(*v) } else { "null" };
            match self.format {
                Format::Csv => {
                    self.buf.extend_from_slice(p.as_bytes());
                    self.buf.push(b',');
                    self.buf.extend_from_slice(ts.as_bytes());
                    self.buf.push(b',');
                    self.buf.extend_from_slice(value.as_bytes());
                    self.buf.push(b'\n');
                }
                Format::Jsonl => {
                    self.buf.extend_from_slice(b"{\"point\":\"");
                    self.buf.extend_from_slice(p.as_bytes());
                    self.buf.extend_from_slice(b"\",\"ts_ms\":");
                    self.buf.extend_from_slice(ts.as_bytes());
                    self.buf.extend_from_slice(b",\"value\":");
                    self.buf.extend_from_slice(value.as_bytes());
                    self.buf.extend_from_slice(b"}\n");
                }
            }
        }
        if self.buf.len() > (1 << 20) {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_buf()?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Bytes buffered but not yet written (for the serialise benchmark).
    pub fn take_buffer_len(&mut self) -> usize {
        let n = self.buf.len();
        self.buf.clear();
        n
    }
}

/// How `gen` writes readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
}
