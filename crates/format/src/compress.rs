//! Compression configuration records that follow the superblock when
//! COMPR_CFGS is set: one per available algorithm, in algorithm order.

use crate::FormatError;

pub const ALG_LZ4: u8 = 0;
pub const ALG_LZMA: u8 = 1;
pub const ALG_DEFLATE: u8 = 2;
pub const ALG_ZSTD: u8 = 3;
/// Number of algorithm ids the format defines.
pub const ALG_COUNT: u8 = 4;

/// Largest physical cluster the format allows.
pub const MAX_PCLUSTER_BYTES: u64 = 1 << 20;

/// `M` bytes of a record payload from `off`, zeros past its end.
fn field<const M: usize>(p: &[u8], off: usize) -> [u8; M] {
    let mut a = [0u8; M];
    for (d, s) in a.iter_mut().zip(p.iter().skip(off)) {
        *d = *s;
    }
    a
}

fn field_u16(p: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(field(p, off))
}

fn field_u32(p: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(field(p, off))
}

/// All algorithm parameters of an image, with defaults for absent records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CompressionConfig {
    /// Bitmap of available algorithms.
    pub available: u16,
    pub lz4_max_distance: u16,
    pub lz4_max_pclusterblks: u16,
    pub lzma_dict_size: u32,
    pub deflate_window_bits: u8,
    pub zstd_window_log: u8,
}

impl CompressionConfig {
    /// Config of an image without COMPR_CFGS: LZ4 only.
    pub fn legacy(lz4_max_distance: u16) -> Self {
        Self {
            available: 1,
            lz4_max_distance,
            lz4_max_pclusterblks: 1,
            ..Self::default()
        }
    }

    /// Checks the available-algorithm bitmap as the kernel does.
    pub fn check_available(available: u16) -> Result<(), FormatError> {
        if available >> ALG_COUNT != 0 {
            return Err(FormatError::invalid("available_compr_algs", available));
        }
        Ok(())
    }

    /// Applies one record's payload for algorithm `alg`.
    pub fn apply_record(&mut self, alg: u8, payload: &[u8]) -> Result<(), FormatError> {
        match alg {
            ALG_LZ4 => {
                if payload.len() < 14 {
                    return Err(FormatError::invalid(
                        "lz4 record size",
                        payload.len() as u64,
                    ));
                }
                self.lz4_max_distance = field_u16(payload, 0);
                self.lz4_max_pclusterblks = field_u16(payload, 2).max(1);
            }
            ALG_LZMA => {
                if payload.len() < 14 {
                    return Err(FormatError::invalid(
                        "lzma record size",
                        payload.len() as u64,
                    ));
                }
                let dict = field_u32(payload, 0);
                let format = field_u16(payload, 4);
                if format != 0 {
                    return Err(FormatError::invalid("lzma format", format));
                }
                if !(4096..=8 << 20).contains(&dict) {
                    return Err(FormatError::invalid("lzma dict_size", dict));
                }
                self.lzma_dict_size = dict;
            }
            ALG_DEFLATE => {
                let &[wb, _, _, _, _, _, ..] = payload else {
                    return Err(FormatError::invalid(
                        "deflate record size",
                        payload.len() as u64,
                    ));
                };
                if wb > 15 {
                    return Err(FormatError::invalid("deflate windowbits", wb));
                }
                self.deflate_window_bits = wb;
            }
            ALG_ZSTD => {
                let &[format, wlog, _, _, _, _, ..] = payload else {
                    return Err(FormatError::invalid(
                        "zstd record size",
                        payload.len() as u64,
                    ));
                };
                if format != 0 {
                    return Err(FormatError::invalid("zstd format", format));
                }
                self.zstd_window_log = match wlog.checked_add(10) {
                    Some(log) if wlog <= 10 => log,
                    _ => return Err(FormatError::invalid("zstd windowlog", wlog)),
                };
            }
            other => return Err(FormatError::invalid("algorithm id", other)),
        }
        Ok(())
    }
}

/// Name of an algorithm id.
pub fn algorithm_name(alg: u8) -> &'static str {
    match alg {
        ALG_LZ4 => "lz4",
        ALG_LZMA => "lzma",
        ALG_DEFLATE => "deflate",
        ALG_ZSTD => "zstd",
        _ => "unknown",
    }
}
