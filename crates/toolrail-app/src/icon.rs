//! The window icon (`assets/icon.png` at the repository root), decoded once at start-up so the
//! app's window and task-bar entry are recognisable.

/// The icon's PNG bytes, shipped inside the binary.
const ICON_PNG: &[u8] = include_bytes!("../../../assets/icon.png");

/// The window icon as eframe takes it, or `None` if the shipped PNG cannot be decoded as 8-bit
/// RGBA (the window then opens with the platform's default icon).
pub fn window_icon() -> Option<egui::IconData> {
    let decoder = png::Decoder::new(std::io::Cursor::new(ICON_PNG));
    let mut reader = decoder.read_info().ok()?;
    let mut rgba = vec![0; reader.output_buffer_size()?];
    let info = reader.next_frame(&mut rgba).ok()?;
    if info.color_type != png::ColorType::Rgba || info.bit_depth != png::BitDepth::Eight {
        return None;
    }
    rgba.truncate(info.buffer_size());
    Some(egui::IconData {
        rgba,
        width: info.width,
        height: info.height,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shipped_icon_decodes_as_rgba() {
        let icon = super::window_icon().expect("assets/icon.png decodes");
        assert_eq!((icon.width, icon.height), (128, 128));
        assert_eq!(icon.rgba.len(), 128 * 128 * 4);
    }
}
