package quant

import "fmt"

// Tensor parallelism hands each rank a band of rows or of columns of a
// weight matrix. Rows are contiguous in the file, so a row band is a view;
// a column band must be gathered row by row, and can only be cut on block
// boundaries because a block's values share their scales.

// RowSlice returns rows [a, b) of a row-major tensor of type t whose rows
// hold cols values each. The result aliases data (no copy); its capacity ends
// with row b so appending to it cannot overwrite the rows after.
func RowSlice(t Type, data []byte, cols, a, b int) ([]byte, error) {
	rb, rows, err := rowLayout(t, data, cols)
	if err != nil {
		return nil, err
	}
	if a < 0 || a > b || b > rows {
		return nil, fmt.Errorf("quant: row range [%d, %d) is not within the tensor's %d rows", a, b, rows)
	}
	return data[a*rb : b*rb : b*rb], nil
}

// ColSlice copies columns [c0, c1) of every one of rows rows of a row-major
// tensor of type t with cols values per row, into a new row-major tensor of
// c1-c0 columns. c0 and c1 must fall on block boundaries.
func ColSlice(t Type, data []byte, rows, cols, c0, c1 int) ([]byte, error) {
	rb, n, err := rowLayout(t, data, cols)
	if err != nil {
		return nil, err
	}
	if n != rows {
		return nil, fmt.Errorf("quant: %s: %d bytes hold %d rows of %d values, not %d", t, len(data), n, cols, rows)
	}
	if c0 < 0 || c0 > c1 || c1 > cols {
		return nil, fmt.Errorf("quant: column range [%d, %d) is not within the tensor's %d columns", c0, c1, cols)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if c0%bs != 0 || c1%bs != 0 {
		return nil, fmt.Errorf("quant: %s: column range [%d, %d) does not fall on %d-value block boundaries", t, c0, c1, bs)
	}
	from, to := c0/bs*ts, c1/bs*ts
	out := make([]byte, 0, rows*(to-from))
	for r := 0; r < rows; r++ {
		out = append(out, data[r*rb+from:r*rb+to]...)
	}
	return out, nil
}

// rowLayout checks that data is a whole number of rows of cols values of
// type t and returns the bytes per row and the row count.
func rowLayout(t Type, data []byte, cols int) (rowBytes, rows int, err error) {
	if !t.Known() {
		return 0, 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if cols <= 0 {
		return 0, 0, fmt.Errorf("quant: %s: %d columns; a row needs at least one value", t, cols)
	}
	n, err := t.RowBytes(int64(cols))
	if err != nil {
		return 0, 0, fmt.Errorf("quant: rows of %d columns: %w", cols, err)
	}
	rb := int(n)
	if len(data)%rb != 0 {
		return 0, 0, fmt.Errorf("quant: %s: %d bytes is not a whole number of %d-byte rows (%d columns)", t, len(data), rb, cols)
	}
	return rb, len(data) / rb, nil
}
