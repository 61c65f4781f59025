//! A guest's screen as libvirt hands it over into a PNG: QEMU writes a binary PPM (`P6`), or in
//! newer versions a PNG.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScreenError {
    #[error("the screenshot is neither a PNG nor a binary PPM image: {0}")]
    NotPpm(String),
    #[error("the screenshot could not be encoded as PNG: {0}")]
    Encode(String),
}

/// A decoded screenshot: 8-bit RGB pixels, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

/// Reads a binary PPM (`P6`, maxval 255), the format QEMU's screendump writes.
pub fn parse_ppm(bytes: &[u8]) -> Result<Screen, ScreenError> {
    let bad = |why: &str| ScreenError::NotPpm(why.to_string());
    // The header is four whitespace-separated tokens (comments start with `#`), then one
    // whitespace byte, then the pixels.
    let mut tokens = Vec::new();
    let mut at = 0;
    while tokens.len() < 4 {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'#') {
            if bytes[at] == b'#' {
                while at < bytes.len() && bytes[at] != b'\n' {
                    at += 1;
                }
            } else {
                at += 1;
            }
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if start == at {
            return Err(bad("the header ends early"));
        }
        tokens.push(String::from_utf8_lossy(&bytes[start..at]).into_owned());
    }
    at += 1;
    if tokens[0] != "P6" {
        return Err(bad(&format!("magic {:?}, not P6", tokens[0])));
    }
    let number = |token: &str| {
        token
            .parse::<u32>()
            .map_err(|_| bad("a size is not a number"))
    };
    let (width, height, maxval) = (
        number(&tokens[1])?,
        number(&tokens[2])?,
        number(&tokens[3])?,
    );
    if maxval != 255 {
        return Err(bad(&format!("maxval {maxval}, not 255")));
    }
    let size = width as usize * height as usize * 3;
    let pixels = bytes.get(at..at + size).ok_or_else(|| {
        bad(&format!(
            "{width}x{height} needs {size} bytes of pixels, there are {}",
            bytes.len().saturating_sub(at)
        ))
    })?;
    Ok(Screen {
        width,
        height,
        rgb: pixels.to_vec(),
    })
}

/// The 8 bytes every PNG file starts with.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A screenshot as a PNG and its size: QEMU hands libvirt a PPM (converted here), or, in newer
/// versions, already a PNG (checked by decoding its header, and kept as it is).
pub fn screenshot_to_png(bytes: &[u8]) -> Result<(u32, u32, Vec<u8>), ScreenError> {
    if bytes.starts_with(PNG_SIGNATURE) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder
            .read_info()
            .map_err(|error| ScreenError::NotPpm(format!("a PNG that does not decode: {error}")))?;
        let info = reader.info();
        return Ok((info.width, info.height, bytes.to_vec()));
    }
    let screen = parse_ppm(bytes)?;
    Ok((screen.width, screen.height, to_png(&screen)?))
}

/// Encodes `screen` as a PNG.
pub fn to_png(screen: &Screen) -> Result<Vec<u8>, ScreenError> {
    let encode = |error: png::EncodingError| ScreenError::Encode(error.to_string());
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, screen.width, screen.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(encode)?;
    writer.write_image_data(&screen.rgb).map_err(encode)?;
    writer.finish().map_err(encode)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ppm_becomes_a_png_of_the_same_size_and_pixels() {
        let mut ppm = b"P6\n# from qemu\n3 2\n255\n".to_vec();
        let pixels: Vec<u8> = (0..18).collect();
        ppm.extend_from_slice(&pixels);
        let screen = parse_ppm(&ppm).unwrap();
        assert_eq!((screen.width, screen.height), (3, 2));
        let png_bytes = to_png(&screen).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buffer = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buffer).unwrap();
        assert_eq!((info.width, info.height), (3, 2));
        assert_eq!(&buffer[..info.buffer_size()], &pixels[..]);
    }

    #[test]
    fn a_png_from_libvirt_is_kept_and_a_ppm_converted() {
        let ppm = [b"P6\n2 1\n255\n".to_vec(), vec![7; 6]].concat();
        let (width, height, png_bytes) = screenshot_to_png(&ppm).unwrap();
        assert_eq!((width, height), (2, 1));
        assert_eq!(
            screenshot_to_png(&png_bytes).unwrap(),
            (2, 1, png_bytes.clone())
        );
        assert!(screenshot_to_png(&png_bytes[..20]).is_err());
    }

    #[test]
    fn what_is_not_a_whole_ppm_is_refused() {
        assert!(parse_ppm(b"P3\n1 1\n255\n0 0 0").is_err());
        assert!(parse_ppm(b"P6\n2 2\n255\n\0\0\0").is_err());
        assert!(parse_ppm(b"P6\n2").is_err());
    }
}
