//! Predefined datatypes of C (MPI-4.1 §3.2.2, Table 3.2) and their sizes on this platform
//! (x86_64 / aarch64 Linux, LP64).

/// A predefined, contiguous datatype. Derived datatypes are not supported yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Datatype {
    /// MPI_CHAR (`char`, 1 byte; not valid for arithmetic reductions).
    Char,
    /// MPI_SIGNED_CHAR
    SignedChar,
    /// MPI_UNSIGNED_CHAR
    UnsignedChar,
    /// MPI_BYTE (untyped byte; not valid for arithmetic reductions).
    Byte,
    /// MPI_WCHAR (`wchar_t`, 4 bytes).
    WChar,
    /// MPI_SHORT
    Short,
    /// MPI_UNSIGNED_SHORT
    UnsignedShort,
    /// MPI_INT
    Int,
    /// MPI_UNSIGNED
    Unsigned,
    /// MPI_LONG
    Long,
    /// MPI_UNSIGNED_LONG
    UnsignedLong,
    /// MPI_LONG_LONG_INT / MPI_LONG_LONG
    LongLong,
    /// MPI_UNSIGNED_LONG_LONG
    UnsignedLongLong,
    /// MPI_FLOAT
    Float,
    /// MPI_DOUBLE
    Double,
    /// MPI_LONG_DOUBLE (x87 80-bit extended in 16 bytes).
    LongDouble,
    /// MPI_INT8_T
    Int8,
    /// MPI_INT16_T
    Int16,
    /// MPI_INT32_T
    Int32,
    /// MPI_INT64_T
    Int64,
    /// MPI_UINT8_T
    Uint8,
    /// MPI_UINT16_T
    Uint16,
    /// MPI_UINT32_T
    Uint32,
    /// MPI_UINT64_T
    Uint64,
    /// MPI_C_BOOL (`_Bool`, 1 byte).
    CBool,
    /// MPI_AINT (8 bytes).
    Aint,
    /// MPI_OFFSET (8 bytes).
    Offset,
    /// MPI_COUNT (8 bytes).
    Count,
    /// MPI_PACKED (1 byte).
    Packed,
}

impl Datatype {
    /// Size of one element in bytes (MPI_Type_size).
    pub fn size(self) -> usize {
        use Datatype::*;
        match self {
            Char | SignedChar | UnsignedChar | Byte | Int8 | Uint8 | CBool | Packed => 1,
            Short | UnsignedShort | Int16 | Uint16 => 2,
            WChar | Int | Unsigned | Float | Int32 | Uint32 => 4,
            Long | UnsignedLong | LongLong | UnsignedLongLong | Double | Int64 | Uint64 | Aint
            | Offset | Count => 8,
            LongDouble => 16,
        }
    }

    /// The MPI name, for error messages.
    pub fn name(self) -> &'static str {
        use Datatype::*;
        match self {
            Char => "MPI_CHAR",
            SignedChar => "MPI_SIGNED_CHAR",
            UnsignedChar => "MPI_UNSIGNED_CHAR",
            Byte => "MPI_BYTE",
            WChar => "MPI_WCHAR",
            Short => "MPI_SHORT",
            UnsignedShort => "MPI_UNSIGNED_SHORT",
            Int => "MPI_INT",
            Unsigned => "MPI_UNSIGNED",
            Long => "MPI_LONG",
            UnsignedLong => "MPI_UNSIGNED_LONG",
            LongLong => "MPI_LONG_LONG",
            UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            Float => "MPI_FLOAT",
            Double => "MPI_DOUBLE",
            LongDouble => "MPI_LONG_DOUBLE",
            Int8 => "MPI_INT8_T",
            Int16 => "MPI_INT16_T",
            Int32 => "MPI_INT32_T",
            Int64 => "MPI_INT64_T",
            Uint8 => "MPI_UINT8_T",
            Uint16 => "MPI_UINT16_T",
            Uint32 => "MPI_UINT32_T",
            Uint64 => "MPI_UINT64_T",
            CBool => "MPI_C_BOOL",
            Aint => "MPI_AINT",
            Offset => "MPI_OFFSET",
            Count => "MPI_COUNT",
            Packed => "MPI_PACKED",
        }
    }
}
