//! How the wire's one-byte codes are typed: an enum naming every code the
//! RFC defines, and `Unknown(u8)` for any other, so that a PDU carrying a
//! code this version does not know still parses and emits unchanged (a
//! receiver answers it, as the RFC says, rather than failing to read it).
//! `from_u8` never makes `Unknown` of a named code, so a code and its
//! byte round-trip both ways.

/// Declares a wire code: the enum, `from_u8`, `to_u8`, `From` both ways,
/// and `Default` as the code 0 reads.
macro_rules! wire_code {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A code no variant names (one of a later RFC, or a peer's
            /// mistake), kept as it came.
            Unknown(u8),
        }

        impl $name {
            /// The code `code` stands for.
            #[inline]
            pub const fn from_u8(code: u8) -> Self {
                match code {
                    $( $value => Self::$variant, )*
                    other => Self::Unknown(other),
                }
            }

            /// The byte on the wire.
            #[inline]
            pub const fn to_u8(self) -> u8 {
                match self {
                    $( Self::$variant => $value, )*
                    Self::Unknown(code) => code,
                }
            }

            /// Whether the RFC names this code.
            #[inline]
            pub const fn is_known(self) -> bool {
                !matches!(Self::from_u8(self.to_u8()), Self::Unknown(_))
            }
        }

        impl From<u8> for $name {
            #[inline]
            fn from(code: u8) -> Self {
                Self::from_u8(code)
            }
        }

        impl From<$name> for u8 {
            #[inline]
            fn from(code: $name) -> u8 {
                code.to_u8()
            }
        }

        impl Default for $name {
            /// As a header of zeros reads.
            fn default() -> Self {
                Self::from_u8(0)
            }
        }
    };
}

pub(crate) use wire_code;
