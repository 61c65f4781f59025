//! Reading text off a screenshot of a screen in the VGA's text mode (80 columns, 25 rows, each
//! character a cell of the same size), without knowing the font: a line of text is on the screen
//! where a row of cells has its shape — blank cells exactly where the text has spaces, and two
//! cells drawn alike exactly where the text has the same character. The firmware's text on the
//! serial console says which lines to look for; a screen that does not show them (blank, or
//! already a booting kernel's) cannot match them by chance.

const COLUMNS: u32 = 80;
const ROWS: u32 = 25;

/// A decoded screenshot: each pixel's colour, row by row.
pub struct Screen {
    width: u32,
    height: u32,
    pixels: Vec<[u8; 3]>,
}

impl Screen {
    /// The PNG `--shot` wrote.
    pub fn decode(png_bytes: &[u8]) -> Screen {
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buffer = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut buffer).unwrap();
        assert_eq!(frame.bit_depth, png::BitDepth::Eight, "{frame:?}");
        let channels = match frame.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("a screenshot in {other:?}"),
        };
        let pixels = buffer[..frame.buffer_size()]
            .chunks(channels)
            .map(|pixel| [pixel[0], pixel[1], pixel[2]])
            .collect();
        Screen {
            width: frame.width,
            height: frame.height,
            pixels,
        }
    }

    /// The pixels of the character cell at `column`, `row`.
    fn cell(&self, column: u32, row: u32) -> Vec<[u8; 3]> {
        let (cell_width, cell_height) = (self.width / COLUMNS, self.height / ROWS);
        let mut cell = Vec::with_capacity((cell_width * cell_height) as usize);
        for y in row * cell_height..(row + 1) * cell_height {
            let start = (y * self.width + column * cell_width) as usize;
            cell.extend_from_slice(&self.pixels[start..start + cell_width as usize]);
        }
        cell
    }

    /// Whether the screen is in text mode: a whole number of pixels per character cell.
    pub fn is_text_mode(&self) -> bool {
        self.width % COLUMNS == 0 && self.height % ROWS == 0
    }

    /// Whether the screen shows every one of `lines` (ASCII, as the serial console printed them),
    /// each on some row from some column, with one drawing per character throughout: every cell
    /// of a character looks the same wherever it is, different characters look different, and a
    /// space is a blank cell.
    pub fn shows(&self, lines: &[&str]) -> bool {
        if !self.is_text_mode() {
            return false;
        }
        let cells: Vec<Vec<Cell>> = (0..ROWS)
            .map(|row| (0..COLUMNS).map(|column| self.cell(column, row)).collect())
            .collect();
        let lines: Vec<Vec<char>> = lines
            .iter()
            .map(|line| line.trim_end().chars().collect())
            .collect();
        place(&cells, &lines, &mut Glyphs::default())
    }
}

type Cell = Vec<[u8; 3]>;

/// What each character looks like, as learnt so far; and which character each drawing is.
#[derive(Default, Clone)]
struct Glyphs {
    of_character: std::collections::HashMap<char, Cell>,
    of_drawing: std::collections::HashMap<Cell, char>,
}

impl Glyphs {
    /// Learns that `cell` draws `character`; false when that contradicts what was learnt.
    fn learn(&mut self, character: char, cell: &Cell) -> bool {
        let blank = cell.iter().all(|pixel| *pixel == cell[0]);
        if blank != (character == ' ') {
            return false;
        }
        if character == ' ' {
            return true;
        }
        match (self.of_character.get(&character), self.of_drawing.get(cell)) {
            (Some(known), _) => known == cell,
            (None, Some(_)) => false,
            (None, None) => {
                self.of_character.insert(character, cell.clone());
                self.of_drawing.insert(cell.clone(), character);
                true
            }
        }
    }
}

/// Finds a place for each of `lines` agreeing with `glyphs` and with each other.
fn place(cells: &[Vec<Cell>], lines: &[Vec<char>], glyphs: &mut Glyphs) -> bool {
    let Some((line, rest)) = lines.split_first() else {
        return true;
    };
    if line.is_empty() || line.len() > COLUMNS as usize {
        return false;
    }
    for row in cells {
        for start in 0..=row.len() - line.len() {
            let mut learnt = glyphs.clone();
            let fits = line
                .iter()
                .zip(&row[start..])
                .all(|(&character, cell)| learnt.learn(character, cell));
            if fits && place(cells, rest, &mut learnt) {
                *glyphs = learnt;
                return true;
            }
        }
    }
    false
}
