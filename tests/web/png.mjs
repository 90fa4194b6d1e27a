// A small PNG reader for the browser test's screenshot check: 8-bit
// grayscale, RGB or RGBA, not interlaced (what Chromium writes). Returns
// { width, height, channels, pixels } with pixels a Uint8Array of rows.
import { inflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const CHANNELS = { 0: 1, 2: 3, 4: 2, 6: 4 }; // by PNG colour type

export function readPng(buf) {
  if (buf.length < 8 || !buf.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG file');
  let width = 0, height = 0, channels = 0;
  const idat = [];
  for (let pos = 8; pos + 8 <= buf.length;) {
    const len = buf.readUInt32BE(pos), type = buf.toString('latin1', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8], colour = data[9], interlace = data[12];
      channels = CHANNELS[colour];
      if (depth !== 8 || !channels || interlace !== 0)
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${colour}, interlace ${interlace}`);
    } else if (type === 'IDAT') {
      idat.push(data);
    } else if (type === 'IEND') {
      break;
    }
    pos += 12 + len;
  }
  if (!channels) throw new Error('PNG without IHDR');
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length !== height * (stride + 1)) throw new Error(`PNG data is ${raw.length} bytes, expected ${height * (stride + 1)}`);
  const pixels = new Uint8Array(height * stride);
  // Undo each row's filter (none, sub, up, average, Paeth) against the row above.
  for (let r = 0; r < height; r++) {
    const filter = raw[r * (stride + 1)];
    const src = raw.subarray(r * (stride + 1) + 1, (r + 1) * (stride + 1));
    const row = pixels.subarray(r * stride, (r + 1) * stride);
    const up = r > 0 ? pixels.subarray((r - 1) * stride, r * stride) : new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? row[i - channels] : 0, b = up[i], c = i >= channels ? up[i - channels] : 0;
      let predictor;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) >> 1; break;
        case 4: {
          const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw new Error(`PNG row ${r} has filter ${filter}`);
      }
      row[i] = (src[i] + predictor) & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

// Mean and variance of the luminance, and the number of distinct colours.
export function imageStats({ width, height, channels, pixels }) {
  let sum = 0, sumSq = 0;
  const colours = new Set();
  for (let i = 0; i < width * height; i++) {
    const p = i * channels;
    const [r, g, b] = channels >= 3 ? [pixels[p], pixels[p + 1], pixels[p + 2]] : [pixels[p], pixels[p], pixels[p]];
    const lum = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    sum += lum;
    sumSq += lum * lum;
    colours.add((r << 16) | (g << 8) | b);
  }
  const n = width * height, mean = sum / n;
  return { mean, variance: sumSq / n - mean * mean, colours: colours.size };
}
